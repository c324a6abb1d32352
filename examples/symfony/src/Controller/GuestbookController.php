<?php

namespace App\Controller;

use Symfony\Bundle\FrameworkBundle\Controller\AbstractController;
use Symfony\Component\Form\Extension\Core\Type\TextareaType;
use Symfony\Component\Form\Extension\Core\Type\TextType;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\Validator\Constraints\Length;
use Symfony\Component\Validator\Constraints\NotBlank;

/**
 * A form with a CSRF token and validation: an invalid entry shows the
 * form again with its errors (422), a valid one is kept in the session and
 * answered with a redirect (303), so that reloading the page does not post
 * it twice.
 */
class GuestbookController extends AbstractController
{
    public function index(Request $request): Response
    {
        $form = $this->createFormBuilder(null, ['csrf_token_id' => 'guestbook'])
            ->add('name', TextType::class, [
                'constraints' => [new NotBlank(), new Length(['max' => 40])],
            ])
            ->add('message', TextareaType::class, [
                'constraints' => [new NotBlank(), new Length(['min' => 3, 'max' => 500])],
            ])
            ->getForm();

        $form->handleRequest($request);
        $session = $request->getSession();
        if ($form->isSubmitted() && $form->isValid()) {
            $entry = $form->getData();
            $entries = $session->get('entries', []);
            $entries[] = ['name' => $entry['name'], 'message' => $entry['message']];
            $session->set('entries', $entries);
            $this->addFlash('notice', sprintf('Thank you, %s.', $entry['name']));

            return $this->redirectToRoute('guestbook', [], Response::HTTP_SEE_OTHER);
        }

        return $this->renderForm('guestbook.html.twig', [
            'form' => $form,
            'entries' => $session->get('entries', []),
        ]);
    }
}
