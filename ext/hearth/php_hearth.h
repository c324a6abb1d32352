#ifndef PHP_HEARTH_H
#define PHP_HEARTH_H

extern zend_module_entry hearth_module_entry;
#define phpext_hearth_ptr &hearth_module_entry

/* Bumped when the functions the PHP library calls change. */
#define PHP_HEARTH_VERSION "1"

#endif
