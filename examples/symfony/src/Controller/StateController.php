<?php

namespace App\Controller;

use App\Service\RequestNote;
use App\Service\StickyNote;
use Symfony\Bundle\FrameworkBundle\Controller\AbstractController;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Contracts\Translation\TranslatorInterface;

/**
 * What a request can leave behind in a process that serves many: session
 * data, the locale, the fields of services. /state shows it; under php-fpm
 * every request starts from nothing, and under Hearth it must too, except
 * for what the app keeps on purpose (StickyNote, see there).
 */
class StateController extends AbstractController
{
    public function __construct(
        private RequestNote $requestNote,
        private StickyNote $stickyNote,
        private TranslatorInterface $translator,
    ) {
    }

    public function show(Request $request): JsonResponse
    {
        $session = $request->hasPreviousSession() ? $request->getSession() : null;

        return new JsonResponse([
            'user' => $session?->get('user'),
            'session' => $session?->all() ?? [],
            'request_locale' => $request->getLocale(),
            'translator_locale' => $this->translator->getLocale(),
            'php_locale' => class_exists(\Locale::class) ? \Locale::getDefault() : null,
            'request_note' => $this->requestNote->text,
            'sticky_note' => $this->stickyNote->text,
        ]);
    }

    /** Writes $text on both notes, in French. */
    public function note(Request $request, string $text): JsonResponse
    {
        $request->setLocale('fr');
        $this->translator->setLocale('fr');
        $this->requestNote->text = $text;
        $this->stickyNote->text = $text;

        return $this->show($request);
    }

    /** Leaves all it can behind (session, locale, notes), then fails. */
    public function boom(Request $request): JsonResponse
    {
        $request->getSession()->set('boom', 'left by /boom');
        $this->note($request, 'left by /boom');

        throw new \RuntimeException('/boom failed on purpose');
    }
}
