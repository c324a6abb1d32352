<?php

namespace App\Controller;

use Symfony\Bundle\FrameworkBundle\Controller\AbstractController;
use Symfony\Component\Form\Extension\Core\Type\TextType;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\Validator\Constraints\NotBlank;

/**
 * Logging in by name only (no password: this is an example of session
 * state, not of authentication): the name is kept in the session, whose
 * id changes at login and logout, as a real login does.
 */
class AccountController extends AbstractController
{
    public function login(Request $request): Response
    {
        $form = $this->createFormBuilder(null, ['csrf_token_id' => 'login'])
            ->add('name', TextType::class, ['constraints' => [new NotBlank()]])
            ->getForm();

        $form->handleRequest($request);
        if ($form->isSubmitted() && $form->isValid()) {
            $session = $request->getSession();
            $session->migrate(true);
            $session->set('user', $form->getData()['name']);

            return $this->redirectToRoute('home', [], Response::HTTP_SEE_OTHER);
        }

        return $this->renderForm('login.html.twig', ['form' => $form]);
    }

    public function logout(Request $request): Response
    {
        if ($this->isCsrfTokenValid('logout', (string) $request->request->get('_token'))) {
            $request->getSession()->invalidate();
        }

        return $this->redirectToRoute('home', [], Response::HTTP_SEE_OTHER);
    }
}
