<?php

namespace App\Controller;

use Symfony\Bundle\FrameworkBundle\Controller\AbstractController;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\Routing\Generator\UrlGeneratorInterface;

class HomeController extends AbstractController
{
    /** The home page counts your visits in your session. */
    public function index(Request $request): Response
    {
        $session = $request->getSession();
        $session->set('visits', $session->get('visits', 0) + 1);

        return $this->render('home.html.twig', [
            'user' => $session->get('user'),
            'visits' => $session->get('visits'),
        ]);
    }

    /** A page in the locale of its URL (/en/hello, /fr/hello). */
    public function hello(Request $request): Response
    {
        // Read from the session only when the client has one: a page for a
        // new visitor starts none.
        $name = $request->hasPreviousSession() ? $request->getSession()->get('user', 'guest') : 'guest';

        return $this->render('hello.html.twig', ['name' => $name]);
    }

    /**
     * The client as the app sees it: behind a proxy Hearth trusts
     * (--trusted-proxy), its address and scheme are the client's.
     */
    public function client(Request $request): JsonResponse
    {
        return new JsonResponse([
            'client_ip' => $request->getClientIp(),
            'secure' => $request->isSecure(),
            'home' => $this->generateUrl('home', [], UrlGeneratorInterface::ABSOLUTE_URL),
        ]);
    }
}
