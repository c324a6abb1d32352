dnl The Hearth extension: PHP's own request startup inside Hearth's workers.
PHP_ARG_ENABLE([hearth],
  [whether to enable the Hearth extension],
  [AS_HELP_STRING([--enable-hearth], [Enable the Hearth worker extension])],
  [yes])

if test "$PHP_HEARTH" != "no"; then
  PHP_NEW_EXTENSION(hearth, hearth.c, $ext_shared)
fi
