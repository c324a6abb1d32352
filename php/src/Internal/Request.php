<?php

declare(strict_types=1);

namespace Hearth\Internal;

/**
 * One request as it came off the socket, not yet decoded.
 *
 * @internal
 */
final class Request
{
    /**
     * @param string      $server serialized $_SERVER of the request
     * @param string      $body     the raw body, when it came in BODY frames (empty for multipart forms)
     * @param string|null $form     serialized fields and uploads of a multipart form
     * @param bool        $call     a job (a CALL frame, $server holds its fields), not an HTTP request
     * @param string|null $bodyFile the file holding the raw body, when Hearth spooled it to disk
     * @param int         $formFlags the flags of the FORM frames: the limits the form ran into
     */
    public function __construct(
        public readonly int $id,
        public readonly string $server,
        public readonly string $body,
        public readonly ?string $form,
        public readonly bool $call = false,
        public readonly ?string $bodyFile = null,
        public readonly int $formFlags = 0,
    ) {
    }
}
