/*
 * The Hearth extension: PHP's own request startup for each request a
 * worker serves.
 *
 * A Hearth worker is one long PHP request that serves many HTTP requests.
 * Without this extension the PHP library builds $_GET, $_POST, $_COOKIE,
 * $_FILES and $_SERVER in PHP code, which can only approximate PHP. With
 * it, hearth_request_begin() describes the request to PHP's SAPI layer
 * (SG(request_info), the body behind sapi_module.read_post, getenv(), the
 * server variables, getallheaders()) and runs the parts of
 * php_request_startup() that turn a request into variables: the post
 * reader and handlers (urlencoded, and multipart through rfc1867 with its
 * limits and warnings), the treat_data of GET, POST and COOKIE through the
 * input filter (so filter_input() sees them), $_SERVER through the input
 * filter, and $_REQUEST. The warnings of that parsing are raised as PHP
 * raises them at request startup: no user error handler sees them (an
 * app's handler that throws cannot kill the worker), they read "PHP
 * Request Startup: ... in Unknown on line 0", they are shown only with
 * display_startup_errors, logged, and kept for error_get_last().
 *
 * hearth_response_begin() does the same for the response: PHP's output
 * layer starts again as at request startup, and the SAPI's write, flush
 * and send_headers callbacks write the response to Hearth's channel, so
 * that headers_sent(), header() after output, flush(), output_buffering
 * and zlib.output_compression behave as under php-fpm.
 *
 * Written in C against PHP's SAPI API, as FrankenPHP does for its worker
 * mode: no maintained binding (ext-php-rs wraps the userland API) exposes
 * SG(request_info) or the SAPI hooks.
 *
 * Ownership: every string this file puts into SG(request_info) is its own
 * (emalloc'd) and is taken out again by hearth_request_end(), which puts
 * back what the worker's own startup had set, so PHP's request shutdown
 * frees only what it allocated itself.
 */

#ifdef HAVE_CONFIG_H
# include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <sys/socket.h>

#include "php.h"
#include "php_ini.h"
#include "php_output.h"
#include "SAPI.h"
#include "php_variables.h"
#include "php_content_types.h"
#include "rfc1867.h"
#include "ext/standard/info.h"
#include "ext/standard/basic_functions.h"
#include "php_hearth.h"

#ifdef ZTS
# error "the Hearth extension is for PHP built without thread safety (NTS), as distributions ship php-cgi"
#endif

/* The request being served, as hearth_request_begin() described it. */
typedef struct {
	bool active;
	/* The request's CGI parameters: what php-fpm's getenv() and
	 * getallheaders() see. */
	zval params;
	/* $_SERVER as the library composed it (parameters, authentication
	 * variables, the worker's environment). */
	zval server;
	/* The body, in memory (offset: how much PHP has read), or in the file
	 * Hearth spooled it to. */
	zend_string *body;
	size_t offset;
	int fd;
	/* SG(request_info) as the worker's startup left it. */
	const char *saved_method;
	char *saved_query;
	char *saved_cookie;
	const char *saved_content_type;
	zend_long saved_content_length;
	char *saved_uri;
	int saved_argc;
	char **saved_argv;
	bool saved_headers_only;
	/* The first index of the shutdown functions the request registers. */
	zend_ulong shutdown_mark;
	/* Ours, put in SG(request_info) for the request. */
	char *method;
	char *query;
	char *cookie;
	char *content_type;
	char *uri;
} hearth_request;

static hearth_request req = { .fd = -1 };

/* The SAPI's own hooks, called when no request of ours is active. */
static bool hooked = false;
static size_t (*orig_read_post)(char *buffer, size_t count);
static char *(*orig_getenv)(const char *name, size_t name_len);
static void (*orig_register_server_variables)(zval *track_vars_array);
static void (*orig_import_environment)(zval *array_ptr);
static zif_handler orig_request_headers;

/* {{{ SAPI hooks */

static size_t hearth_read_post(char *buffer, size_t count)
{
	if (!req.active) {
		return orig_read_post ? orig_read_post(buffer, count) : 0;
	}
	if (req.fd >= 0) {
		/* PHP takes a short read for the end of the body: fill the buffer. */
		size_t total = 0;
		while (total < count) {
			ssize_t n = read(req.fd, buffer + total, count - total);
			if (n < 0 && errno == EINTR) {
				continue;
			}
			if (n <= 0) {
				break;
			}
			total += (size_t) n;
		}
		return total;
	}
	if (!req.body || req.offset >= ZSTR_LEN(req.body)) {
		return 0;
	}
	size_t n = MIN(count, ZSTR_LEN(req.body) - req.offset);
	memcpy(buffer, ZSTR_VAL(req.body) + req.offset, n);
	req.offset += n;
	return n;
}

/* getenv('NAME'): the request's parameters first, then the environment,
 * as under php-fpm. */
static char *hearth_getenv(const char *name, size_t name_len)
{
	if (req.active) {
		zval *value = zend_hash_str_find(Z_ARRVAL(req.params), name, name_len);
		if (value && Z_TYPE_P(value) == IS_STRING) {
			/* sapi_getenv() copies it. */
			return Z_STRVAL_P(value);
		}
	}
	return orig_getenv ? orig_getenv(name, name_len) : NULL;
}

/* getenv() with no name and $_ENV: the environment, then the request's
 * parameters over it, as php-fpm imports them. */
static void hearth_import_environment(zval *array_ptr)
{
	orig_import_environment(array_ptr);
	if (!req.active) {
		return;
	}
	zend_string *key;
	zval *value;
	ZEND_HASH_FOREACH_STR_KEY_VAL(Z_ARRVAL(req.params), key, value) {
		if (key && Z_TYPE_P(value) == IS_STRING) {
			Z_TRY_ADDREF_P(value);
			zend_symtable_update(Z_ARRVAL_P(array_ptr), key, value);
		}
	} ZEND_HASH_FOREACH_END();
}

/* $_SERVER: each variable through the input filter, as a SAPI registers
 * them, so filter_input(INPUT_SERVER, ...) sees them. */
static void hearth_register_server_variables(zval *track_vars_array)
{
	if (!req.active) {
		if (orig_register_server_variables) {
			orig_register_server_variables(track_vars_array);
		}
		return;
	}
	zend_string *key;
	zval *value;
	ZEND_HASH_FOREACH_STR_KEY_VAL(Z_ARRVAL(req.server), key, value) {
		if (!key) {
			continue;
		}
		if (Z_TYPE_P(value) != IS_STRING) {
			Z_TRY_ADDREF_P(value);
			zend_symtable_update(Z_ARRVAL_P(track_vars_array), key, value);
			continue;
		}
		size_t len = Z_STRLEN_P(value);
		/* The filter may replace it: it must be emalloc'd. */
		char *val = estrndup(Z_STRVAL_P(value), len);
		if (sapi_module.input_filter(PARSE_SERVER, ZSTR_VAL(key), &val, len, &len)) {
			php_register_variable_safe(ZSTR_VAL(key), val, len, track_vars_array);
		}
		efree(val);
	} ZEND_HASH_FOREACH_END();
}

/* getallheaders() and apache_request_headers(), as php-fpm builds them. */
static ZEND_FUNCTION(hearth_request_headers)
{
	if (!req.active) {
		orig_request_headers(INTERNAL_FUNCTION_PARAM_PASSTHRU);
		return;
	}
	ZEND_PARSE_PARAMETERS_NONE();
	array_init(return_value);
	zend_string *key;
	zval *value;
	ZEND_HASH_FOREACH_STR_KEY_VAL(Z_ARRVAL(req.params), key, value) {
		if (key && Z_TYPE_P(value) == IS_STRING) {
			sapi_add_request_header(ZSTR_VAL(key), (unsigned int) ZSTR_LEN(key),
				Z_STRVAL_P(value), (unsigned int) Z_STRLEN_P(value), return_value);
		}
	} ZEND_HASH_FOREACH_END();
}

static void replace_handler(const char *name, size_t len)
{
	zend_function *f = zend_hash_str_find_ptr(CG(function_table), name, len);
	if (f && f->type == ZEND_INTERNAL_FUNCTION && f->internal_function.handler != ZEND_FN(hearth_request_headers)) {
		orig_request_headers = f->internal_function.handler;
		f->internal_function.handler = ZEND_FN(hearth_request_headers);
	}
}


/* }}} */

/* {{{ Request startup */

/* sapi_read_post_data() of main/SAPI.c, which is static there: picks the
 * post reader for the content type and runs it. */
static void read_post_data(void)
{
	size_t length = strlen(SG(request_info).content_type);
	char *content_type = estrndup(SG(request_info).content_type, length);
	char *p;
	char oldchar = 0;
	void (*post_reader_func)(void) = NULL;
	sapi_post_entry *post_entry;

	for (p = content_type; p < content_type + length; p++) {
		switch (*p) {
			case ';':
			case ',':
			case ' ':
				length = p - content_type;
				oldchar = *p;
				*p = 0;
				break;
			default:
				*p = tolower((unsigned char) *p);
				break;
		}
	}
	if ((post_entry = zend_hash_str_find_ptr(&SG(known_post_content_types), content_type, length)) != NULL) {
		SG(request_info).post_entry = post_entry;
		post_reader_func = post_entry->post_reader;
	} else {
		SG(request_info).post_entry = NULL;
		if (!sapi_module.default_post_reader) {
			SG(request_info).content_type_dup = NULL;
			sapi_module.sapi_error(E_WARNING, "Unsupported content type:  '%s'", content_type);
			efree(content_type);
			return;
		}
	}
	if (oldchar) {
		*(p - 1) = oldchar;
	}
	SG(request_info).content_type_dup = content_type;
	if (post_reader_func) {
		post_reader_func();
	}
	if (sapi_module.default_post_reader) {
		sapi_module.default_post_reader();
	}
}

static zend_module_entry *module_named(const char *name, size_t len)
{
	return zend_hash_str_find_ptr(&module_registry, name, len);
}

/* The input filter keeps its own copies of GET, POST, COOKIE, SERVER and
 * ENV for filter_input(); they go at the end of a request. */
static void filter_request_shutdown(void)
{
	zend_module_entry *filter = module_named(ZEND_STRL("filter"));
	if (filter && filter->request_shutdown_func) {
		filter->request_shutdown_func(filter->type, filter->module_number);
	}
}

/* zlib keeps, for the request, the encoding the client accepts (read from
 * $_SERVER once, by ob_gzhandler) and the state of a legacy
 * ob_gzhandler() call: both start again with each request. */
static void zlib_next_request(void)
{
	zend_module_entry *zlib = module_named(ZEND_STRL("zlib"));
	if (!zlib) {
		return;
	}
	if (zlib->request_shutdown_func) {
		zlib->request_shutdown_func(zlib->type, zlib->module_number);
	}
	if (zlib->request_startup_func) {
		zlib->request_startup_func(zlib->type, zlib->module_number);
	}
}

static void arm(const char *name, size_t len)
{
	zend_auto_global *g = zend_hash_str_find_ptr(CG(auto_globals), name, len);
	if (g && g->auto_global_callback) {
		g->armed = g->auto_global_callback(g->name);
	}
}

static zend_auto_global *server_global;
static zend_auto_global_callback orig_server_callback;

/* Whether $_SERVER can be the library's array as it is: registering each
 * variable through the input filter would change nothing, because no
 * default filter is set and no name is one PHP mangles (" ", "." or "["
 * in it), and PHP would add nothing to it. Registering 40 to 60 variables
 * one by one costs more than the rest of the request startup together. */
static bool server_as_given(void)
{
	/* PHP's own callback empties $_SERVER without "S" in variables_order,
	 * and adds argv and argc with register_argc_argv. */
	const char *order = PG(variables_order);
	if (!order || !strpbrk(order, "Ss") || PG(register_argc_argv)) {
		return false;
	}
	const char *filter = zend_ini_string_ex("filter.default", sizeof("filter.default") - 1, 0, NULL);
	if (filter && *filter && strcmp(filter, "unsafe_raw") != 0) {
		return false;
	}
	zend_string *key;
	ZEND_HASH_FOREACH_STR_KEY(Z_ARRVAL(req.server), key) {
		if (!key || strpbrk(ZSTR_VAL(key), " .[") != NULL) {
			return false;
		}
	} ZEND_HASH_FOREACH_END();
	return true;
}

/* The _SERVER auto global's callback while $_SERVER is the library's
 * array: what the input filter keeps of it (filter_input(INPUT_SERVER))
 * is made when first asked for; $_SERVER itself is left as the app has it. */
static bool server_filter_copy(zend_string *name)
{
	(void) name;
	if (!req.active) {
		return false;
	}
	server_global->armed = 0;
	zend_string *key;
	zval *value;
	ZEND_HASH_FOREACH_STR_KEY_VAL(Z_ARRVAL(req.server), key, value) {
		if (key && Z_TYPE_P(value) == IS_STRING) {
			size_t len = Z_STRLEN_P(value);
			char *val = estrndup(Z_STRVAL_P(value), len);
			sapi_module.input_filter(PARSE_SERVER, ZSTR_VAL(key), &val, len, &len);
			efree(val);
		}
	} ZEND_HASH_FOREACH_END();
	return false;
}

static void build_server(void)
{
	if (!server_global) {
		server_global = zend_hash_str_find_ptr(CG(auto_globals), ZEND_STRL("_SERVER"));
		if (!server_global) {
			return;
		}
		orig_server_callback = server_global->auto_global_callback;
	}
	if (!server_as_given()) {
		server_global->auto_global_callback = orig_server_callback;
		server_global->armed = orig_server_callback(server_global->name);
		return;
	}
	zval *server = &PG(http_globals)[TRACK_VARS_SERVER];
	zval_ptr_dtor_nogc(server);
	ZVAL_COPY(server, &req.server);
	zend_hash_update(&EG(symbol_table), server_global->name, server);
	Z_ADDREF_P(server);
	server_global->auto_global_callback = server_filter_copy;
	server_global->armed = 1;
}

/* What php_hash_environment() does at request startup, for a script that
 * is already running: each request global built again, in PHP's order. */
static void build_globals(void)
{
	zval *files = &PG(http_globals)[TRACK_VARS_FILES];
	zval_ptr_dtor_nogc(files);
	ZVAL_UNDEF(files);
	arm(ZEND_STRL("_GET"));
	arm(ZEND_STRL("_POST"));
	arm(ZEND_STRL("_COOKIE"));
	build_server();
	arm(ZEND_STRL("_REQUEST"));
	arm(ZEND_STRL("_FILES"));
}

static char *param_dup(const char *name, size_t len)
{
	zval *value = zend_hash_str_find(Z_ARRVAL(req.params), name, len);
	if (!value || Z_TYPE_P(value) != IS_STRING) {
		return NULL;
	}
	return estrndup(Z_STRVAL_P(value), Z_STRLEN_P(value));
}

static void describe_request(void)
{
	req.saved_method = SG(request_info).request_method;
	req.saved_query = SG(request_info).query_string;
	req.saved_cookie = SG(request_info).cookie_data;
	req.saved_content_type = SG(request_info).content_type;
	req.saved_content_length = SG(request_info).content_length;
	req.saved_uri = SG(request_info).request_uri;
	req.saved_argc = SG(request_info).argc;
	req.saved_argv = SG(request_info).argv;
	req.saved_headers_only = SG(request_info).headers_only;

	req.method = param_dup(ZEND_STRL("REQUEST_METHOD"));
	req.query = param_dup(ZEND_STRL("QUERY_STRING"));
	req.cookie = param_dup(ZEND_STRL("HTTP_COOKIE"));
	req.content_type = param_dup(ZEND_STRL("CONTENT_TYPE"));
	req.uri = param_dup(ZEND_STRL("REQUEST_URI"));
	SG(request_info).request_method = req.method;
	SG(request_info).query_string = req.query;
	SG(request_info).cookie_data = req.cookie;
	SG(request_info).content_type = req.content_type;
	SG(request_info).request_uri = req.uri;
	zval *length = zend_hash_str_find(Z_ARRVAL(req.params), ZEND_STRL("CONTENT_LENGTH"));
	SG(request_info).content_length = length && Z_TYPE_P(length) == IS_STRING
		? ZEND_STRTOL(Z_STRVAL_P(length), NULL, 10) : 0;
	/* As under php-fpm: no command line, so register_argc_argv makes
	 * $_SERVER['argv'] of the query string. */
	SG(request_info).argc = 0;
	SG(request_info).argv = NULL;
	SG(request_info).headers_only = req.method && strcmp(req.method, "HEAD") == 0;

	/* What sapi_activate() resets for the response head. */
	SG(sapi_headers).send_default_content_type = 1;
	if (Z_TYPE(SG(callback_func)) != IS_UNDEF) {
		zval_ptr_dtor(&SG(callback_func));
		ZVAL_UNDEF(&SG(callback_func));
	}
	/* What sapi_activate() resets for the input. */
	SG(read_post_bytes) = 0;
	SG(post_read) = 0;
	SG(request_info).request_body = NULL;
	SG(request_info).post_entry = NULL;
	SG(request_info).content_type_dup = NULL;
	SG(rfc1867_uploaded_files) = NULL;
	zval *time = zend_hash_str_find(Z_ARRVAL(req.server), ZEND_STRL("REQUEST_TIME_FLOAT"));
	SG(global_request_time) = time ? zval_get_double(time) : 0;
}

/* Errors raised while the request's input is parsed are raised as at
 * request startup: outside any function and any user error handler. */
typedef struct {
	zend_execute_data *execute_data;
	zval user_error_handler;
	bool during_request_startup;
} startup_scope;

static void startup_enter(startup_scope *s)
{
	s->execute_data = EG(current_execute_data);
	ZVAL_COPY_VALUE(&s->user_error_handler, &EG(user_error_handler));
	ZVAL_UNDEF(&EG(user_error_handler));
	s->during_request_startup = PG(during_request_startup);
	PG(during_request_startup) = 1;
	EG(current_execute_data) = NULL;
}

static void startup_leave(startup_scope *s)
{
	EG(current_execute_data) = s->execute_data;
	PG(during_request_startup) = s->during_request_startup;
	if (Z_TYPE(EG(user_error_handler)) != IS_UNDEF) {
		zval_ptr_dtor(&EG(user_error_handler));
	}
	ZVAL_COPY_VALUE(&EG(user_error_handler), &s->user_error_handler);
}

static void request_end(void)
{
	if (!req.active) {
		return;
	}
	if (SG(rfc1867_uploaded_files)) {
		/* Uploads the app did not move are deleted, as at request end. */
		destroy_uploaded_files_hash();
		SG(rfc1867_uploaded_files) = NULL;
	}
	if (SG(request_info).request_body) {
		/* php://input streams read this one without holding it: one an
		 * app keeps open past its request (in a static, say) must not be
		 * read again (docs/compatibility.md says so), as such a handle
		 * could not outlive a php-fpm request at all. */
		php_stream_close(SG(request_info).request_body);
		SG(request_info).request_body = NULL;
	}
	if (SG(request_info).content_type_dup) {
		efree(SG(request_info).content_type_dup);
		SG(request_info).content_type_dup = NULL;
	}
	SG(request_info).post_entry = NULL;
	filter_request_shutdown();
	if (server_global) {
		server_global->auto_global_callback = orig_server_callback;
		server_global->armed = 0;
	}

	SG(request_info).request_method = req.saved_method;
	SG(request_info).query_string = req.saved_query;
	SG(request_info).cookie_data = req.saved_cookie;
	SG(request_info).content_type = req.saved_content_type;
	SG(request_info).content_length = req.saved_content_length;
	SG(request_info).request_uri = req.saved_uri;
	SG(request_info).argc = req.saved_argc;
	SG(request_info).argv = req.saved_argv;
	SG(request_info).headers_only = req.saved_headers_only;
	SG(read_post_bytes) = 0;
	SG(post_read) = 1;
	char **ours[] = { &req.method, &req.query, &req.cookie, &req.content_type, &req.uri };
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
		if (*ours[i]) {
			efree(*ours[i]);
			*ours[i] = NULL;
		}
	}
	zval_ptr_dtor(&req.params);
	ZVAL_UNDEF(&req.params);
	zval_ptr_dtor(&req.server);
	ZVAL_UNDEF(&req.server);
	if (req.body) {
		zend_string_release(req.body);
		req.body = NULL;
	}
	if (req.fd >= 0) {
		close(req.fd);
		req.fd = -1;
	}
	req.active = false;
}

/* }}} */

/* {{{ Response output
 *
 * While a response is being made, PHP's own output layer runs as at a
 * php-fpm request: the request starts with the default buffer of
 * output_buffering (or output_handler), output the app flushes past it
 * marks the headers as sent (header() after that warns, headers_sent() is
 * true), and the SAPI's write, flush and send_headers callbacks go to
 * Hearth: the head as a HEAD frame, output as BODY frames. Output is held
 * here up to OUT_HOLD bytes, as php-fpm holds it in its FastCGI buffer,
 * and leaves sooner on flush(). A worker's php.ini settings for output are
 * the ones Hearth read for requests (hearth.output_buffering and the like:
 * the process itself runs with output_buffering=1 so that boot output is
 * caught and logged). */

#define FRAME_VERSION 1
#define FRAME_HEADER 12
#define KIND_BODY 3
#define KIND_END 4
#define KIND_HEAD 5
#define FLAG_STREAM 0x0002
#define FLAG_DETACHED 0x0004
/* Output held before it goes to Hearth; a response that ends within it
 * arrives whole, with its length known. */
#define OUT_HOLD (1024 * 1024)
/* The largest BODY frame written (Hearth accepts 16 MiB). */
#define OUT_FRAME_MAX (1024 * 1024)
#define NO_FRAME ((size_t) -1)

/* Output on its way to Hearth. It is malloc'd, not emalloc'd: like
 * php-fpm's FastCGI buffer it is the SAPI's, outside memory_limit, so that
 * sending the head and the output of a request that ran out of memory
 * cannot fail on the limit (PHP's error path discards the output layer's
 * buffers while they are in use). */
typedef struct {
	char *data;
	size_t len;
	size_t cap;
} out_buffer;

typedef struct {
	/* A response is being made. */
	bool active;
	/* Its END went (fastcgi_finish_request()): further output is dropped. */
	bool done;
	/* Writing to Hearth failed, or memory for the buffer: the worker is
	 * done for. */
	bool failed;
	/* The HEAD frame is at the start of buf, not written yet. */
	bool head_held;
	bool saved_no_headers;
	uint32_t id;
	/* A header line the head leaves out (the session cookie the worker
	 * caused, not the app). */
	char *drop;
	size_t drop_len;
	out_buffer buf;
	/* Where in buf the BODY frame that output still joins starts. */
	size_t body_at;
} hearth_response;

static hearth_response resp = { .body_at = NO_FRAME };

/* PHP is shutting the worker down: its own callbacks again. */
static bool exiting = false;
static size_t (*orig_ub_write)(const char *str, size_t len);
static void (*orig_flush)(void *server_context);
static int (*orig_send_headers)(sapi_headers_struct *sapi_headers);

static void put_u16(unsigned char *at, uint16_t v)
{
	at[0] = (unsigned char) (v >> 8);
	at[1] = (unsigned char) v;
}

static void put_u32(unsigned char *at, uint32_t v)
{
	at[0] = (unsigned char) (v >> 24);
	at[1] = (unsigned char) (v >> 16);
	at[2] = (unsigned char) (v >> 8);
	at[3] = (unsigned char) v;
}

static void frame_header(unsigned char *h, int kind, uint16_t flags, uint32_t length)
{
	h[0] = FRAME_VERSION;
	h[1] = (unsigned char) kind;
	put_u16(h + 2, flags);
	put_u32(h + 4, resp.id);
	put_u32(h + 8, length);
}

static bool out_reserve(size_t more)
{
	if (resp.buf.cap - resp.buf.len >= more) {
		return true;
	}
	size_t cap = MAX(resp.buf.cap * 2, resp.buf.len + more);
	cap = MAX(cap, 16 * 1024);
	char *data = realloc(resp.buf.data, cap);
	if (!data) {
		resp.failed = true;
		return false;
	}
	resp.buf.data = data;
	resp.buf.cap = cap;
	return true;
}

static void out_append(const char *data, size_t len)
{
	if (len && out_reserve(len)) {
		memcpy(resp.buf.data + resp.buf.len, data, len);
		resp.buf.len += len;
	}
}

/* Writes all of it to the channel, the worker's standard input (a socket:
 * MSG_NOSIGNAL, so that Hearth gone is an error here, not a signal). */
static bool channel_write(const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = send(STDIN_FILENO, data, len, MSG_NOSIGNAL);
		if (n < 0 && errno == ENOTSOCK) {
			n = write(STDIN_FILENO, data, len);
		}
		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			return false;
		}
		data += n;
		len -= (size_t) n;
	}
	return true;
}

/* Sends what is held. Before the end of the response that makes it a
 * streamed one: the HEAD frame, if it is among it, says so. */
static void out_send(bool at_end)
{
	if (resp.buf.len > 0) {
		if (resp.head_held && !at_end) {
			unsigned char *flags = (unsigned char *) resp.buf.data + 2;
			put_u16(flags, (uint16_t) (((flags[0] << 8) | flags[1]) | FLAG_STREAM));
		}
		if (!resp.failed && !channel_write(resp.buf.data, resp.buf.len)) {
			resp.failed = true;
		}
		resp.buf.len = 0;
	}
	resp.head_held = false;
	resp.body_at = NO_FRAME;
}

/* Starts a frame in the buffer; its length is set by frame_done(). */
static size_t frame_start(int kind, uint16_t flags)
{
	unsigned char h[FRAME_HEADER];
	frame_header(h, kind, flags, 0);
	size_t at = resp.buf.len;
	out_append((const char *) h, FRAME_HEADER);
	resp.body_at = NO_FRAME;
	return at;
}

static void frame_done(size_t at)
{
	if (resp.buf.len >= at + FRAME_HEADER) {
		put_u32((unsigned char *) resp.buf.data + at + 8, (uint32_t) (resp.buf.len - at - FRAME_HEADER));
	}
}

static void out_body(const char *str, size_t len)
{
	if (len >= OUT_HOLD) {
		/* Large writes go as they are, in frames, without a copy. */
		out_send(false);
		while (len > 0 && !resp.failed) {
			size_t n = MIN(len, OUT_FRAME_MAX);
			unsigned char h[FRAME_HEADER];
			frame_header(h, KIND_BODY, 0, (uint32_t) n);
			if (!channel_write((const char *) h, FRAME_HEADER) || !channel_write(str, n)) {
				resp.failed = true;
			}
			str += n;
			len -= n;
		}
		return;
	}
	if (resp.body_at == NO_FRAME) {
		resp.body_at = frame_start(KIND_BODY, 0);
	}
	/* Joins the BODY frame that is still held. */
	out_append(str, len);
	frame_done(resp.body_at);
	if (resp.buf.len >= OUT_HOLD) {
		out_send(false);
	}
}

static size_t hearth_ub_write(const char *str, size_t len)
{
	if (!resp.active || exiting) {
		/* Between requests: to standard output, which Hearth logs. */
		return orig_ub_write(str, len);
	}
	if (!resp.done && !resp.failed) {
		out_body(str, len);
	}
	return len;
}

static void hearth_flush(void *server_context)
{
	if (!resp.active || exiting) {
		if (orig_flush) {
			orig_flush(server_context);
		}
		return;
	}
	if (!resp.done) {
		out_send(false);
	}
}

static bool dropped(const sapi_header_struct *h)
{
	return resp.drop && h->header_len >= resp.drop_len
		&& memcmp(h->header, resp.drop, resp.drop_len) == 0
		&& (h->header_len == resp.drop_len || h->header[resp.drop_len] == ';');
}

/* The HEAD frame: the status, then the header lines joined by "\n" (PHP
 * refuses CR and LF in a header, so no line contains one). By now PHP has
 * added its default Content-Type and run the header_register_callback()
 * callback (sapi_send_headers()). */
static int hearth_send_headers(sapi_headers_struct *sapi_headers)
{
	if (exiting) {
		return orig_send_headers ? orig_send_headers(sapi_headers) : SAPI_HEADER_DO_SEND;
	}
	if (!resp.active || resp.done) {
		/* Output between requests: no CGI head in the log. */
		return SAPI_HEADER_SENT_SUCCESSFULLY;
	}
	bool first = resp.buf.len == 0;
	size_t at = frame_start(KIND_HEAD, 0);
	unsigned char status[2];
	int code = sapi_headers->http_response_code;
	put_u16(status, (uint16_t) (code > 0 && code < 65536 ? code : 200));
	out_append((const char *) status, 2);
	bool dropped_one = false;
	bool any = false;
	zend_llist_position pos;
	sapi_header_struct *h = zend_llist_get_first_ex(&sapi_headers->headers, &pos);
	while (h) {
		if (!dropped_one && dropped(h)) {
			dropped_one = true;
		} else {
			if (any) {
				out_append("\n", 1);
			}
			out_append(h->header, h->header_len);
			any = true;
		}
		h = zend_llist_get_next_ex(&sapi_headers->headers, &pos);
	}
	frame_done(at);
	resp.head_held = first;
	return SAPI_HEADER_SENT_SUCCESSFULLY;
}


/* The SAPI hooks of the request (input) and the response (output),
 * installed at the first request, so a PHP that merely loads the extension
 * (php-fpm, the CLI) runs unchanged. */
static void hook(void)
{
	if (hooked) {
		return;
	}
	hooked = true;
	orig_read_post = sapi_module.read_post;
	sapi_module.read_post = hearth_read_post;
	orig_getenv = sapi_module.getenv;
	sapi_module.getenv = hearth_getenv;
	orig_register_server_variables = sapi_module.register_server_variables;
	sapi_module.register_server_variables = hearth_register_server_variables;
	orig_import_environment = php_import_environment_variables;
	php_import_environment_variables = hearth_import_environment;
	replace_handler(ZEND_STRL("apache_request_headers"));
	replace_handler(ZEND_STRL("getallheaders"));
	orig_ub_write = sapi_module.ub_write;
	sapi_module.ub_write = hearth_ub_write;
	orig_flush = sapi_module.flush;
	sapi_module.flush = hearth_flush;
	orig_send_headers = sapi_module.send_headers;
	sapi_module.send_headers = hearth_send_headers;
}

/* A setting of php.ini as Hearth passed it on for requests. */
static zend_string *request_setting(const char *name, size_t len)
{
	zval *value = cfg_get_entry(name, len);
	return value && Z_TYPE_P(value) == IS_STRING ? Z_STR_P(value) : NULL;
}

/* What php_request_startup() starts the output layer with. */
static void start_output(void)
{
	zend_string *handler = request_setting(ZEND_STRL("hearth.output_handler"));
	zend_string *buffering = request_setting(ZEND_STRL("hearth.output_buffering"));
	zend_string *implicit = request_setting(ZEND_STRL("hearth.implicit_flush"));
	if (handler && ZSTR_LEN(handler) > 0) {
		zval oh;
		ZVAL_STR_COPY(&oh, handler);
		php_output_start_user(&oh, 0, PHP_OUTPUT_HANDLER_STDFLAGS);
		zval_ptr_dtor(&oh);
		return;
	}
	zend_long size = 0;
	if (buffering) {
		zend_string *error = NULL;
		size = zend_ini_parse_quantity(buffering, &error);
		if (error) {
			zend_string_release(error);
		}
	}
	if (size) {
		php_output_start_user(NULL, size > 1 ? (size_t) size : 0, PHP_OUTPUT_HANDLER_STDFLAGS);
	} else if (implicit && zend_ini_parse_bool(implicit)) {
		php_output_set_implicit_flush(1);
	}
}

/* zlib.output_compression as php.ini sets it for requests: it starts
 * compressing once $_SERVER says what the client accepts, as zlib's own
 * request startup does after the request's variables are made. */
static void start_compression(void)
{
	zend_string *compression = request_setting(ZEND_STRL("hearth.zlib_output_compression"));
	if (!compression || ZSTR_LEN(compression) == 0 || zend_string_equals_literal(compression, "0")
		|| zend_string_equals_literal_ci(compression, "off")) {
		return;
	}
	zend_string *name = zend_string_init(ZEND_STRL("zlib.output_compression"), 0);
	zend_alter_ini_entry_chars(name, ZSTR_VAL(compression), ZSTR_LEN(compression), PHP_INI_USER, PHP_INI_STAGE_RUNTIME);
	zend_string_release(name);
}

static void response_release(void)
{
	if (!resp.active) {
		return;
	}
	resp.active = false;
	resp.done = false;
	resp.head_held = false;
	resp.body_at = NO_FRAME;
	SG(request_info).no_headers = resp.saved_no_headers;
	free(resp.drop);
	resp.drop = NULL;
	resp.drop_len = 0;
	resp.buf.len = 0;
	if (resp.buf.cap > 64 * 1024) {
		/* A large response's buffer goes with it, as with a request. */
		free(resp.buf.data);
		resp.buf.data = NULL;
		resp.buf.cap = 0;
	}
}

/* Every buffer ended into the response, and the head out if no output
 * has sent it: what PHP does when a request ends. */
static void response_output_end(void)
{
	if (!resp.active || resp.done) {
		return;
	}
	php_output_end_all();
	if (!SG(headers_sent)) {
		sapi_send_headers();
	}
}

/* }}} */

/* {{{ proto void hearth_request_begin(array $params, array $server, string $body, ?string $bodyFile)
   Makes the request's globals with PHP's own request startup. $params are
   the request's CGI parameters, $server is $_SERVER as the library composed
   it, the body is $body, or the file $bodyFile when Hearth spooled it. */
PHP_FUNCTION(hearth_request_begin)
{
	zval *params, *server;
	zend_string *body;
	zend_string *body_file = NULL;

	ZEND_PARSE_PARAMETERS_START(4, 4)
		Z_PARAM_ARRAY(params)
		Z_PARAM_ARRAY(server)
		Z_PARAM_STR(body)
		Z_PARAM_PATH_STR_OR_NULL(body_file)
	ZEND_PARSE_PARAMETERS_END();

	request_end();
	int fd = -1;
	if (body_file) {
		fd = open(ZSTR_VAL(body_file), O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			zend_throw_error(NULL, "cannot open the request body %s: %s", ZSTR_VAL(body_file), strerror(errno));
			RETURN_THROWS();
		}
	}
	hook();
	ZVAL_COPY(&req.params, params);
	ZVAL_COPY(&req.server, server);
	req.body = zend_string_copy(body);
	req.offset = 0;
	req.fd = fd;
	req.active = true;
	describe_request();
	/* A new table's next index is ZEND_LONG_MIN, meaning 0. */
	req.shutdown_mark = BG(user_shutdown_function_names)
			&& BG(user_shutdown_function_names)->nNextFreeElement > 0
		? (zend_ulong) BG(user_shutdown_function_names)->nNextFreeElement
		: 0;
	filter_request_shutdown();
	/* At the start of a request, not the end of the last: by now the
	 * library has put back the ini settings that request changed. */
	zlib_next_request();

	startup_scope scope;
	startup_enter(&scope);
	if (PG(enable_post_data_reading)
		&& SG(request_info).content_type
		&& SG(request_info).request_method
		&& strcmp(SG(request_info).request_method, "POST") == 0) {
		read_post_data();
	}
	if (sapi_module.input_filter_init) {
		sapi_module.input_filter_init();
	}
	build_globals();
	if (resp.active) {
		start_compression();
	}
	startup_leave(&scope);
}
/* }}} */

/* {{{ proto void hearth_request_shutdown_functions()
   Calls the shutdown functions registered during the request, in order,
   and forgets them, as PHP calls them when a request ends: their output is
   the response's. Those registered before the request (the worker's own,
   the app's at boot) stay for the worker's exit. */
PHP_FUNCTION(hearth_request_shutdown_functions)
{
	ZEND_PARSE_PARAMETERS_NONE();
	if (!req.active) {
		return;
	}
	for (;;) {
		HashTable *functions = BG(user_shutdown_function_names);
		if (!functions) {
			return;
		}
		/* The first one registered during the request: one of them may
		 * register more, which run too, as in PHP. */
		zend_ulong index;
		zval *entry = NULL;
		ZEND_HASH_FOREACH_NUM_KEY_VAL(functions, index, entry) {
			if (index >= req.shutdown_mark) {
				break;
			}
			entry = NULL;
		} ZEND_HASH_FOREACH_END();
		if (!entry) {
			return;
		}
		php_shutdown_function_entry *call = Z_PTR_P(entry);
		zval retval;
		call->fci.retval = &retval;
		zend_result status = zend_call_function(&call->fci, &call->fci_cache);
		if (status == SUCCESS) {
			zval_ptr_dtor(&retval);
		}
		/* The table may have been replaced while the function ran. */
		if (BG(user_shutdown_function_names)) {
			zend_hash_index_del(BG(user_shutdown_function_names), index);
		}
		if (EG(exception)) {
			return;
		}
	}
}
/* }}} */

/* {{{ proto void hearth_response_begin(int $id)
   Starts the response of request $id as PHP starts a request's output:
   a fresh output layer with php.ini's default buffer, no headers sent.
   Call it before hearth_request_begin(). */
PHP_FUNCTION(hearth_response_begin)
{
	zend_long id;

	ZEND_PARSE_PARAMETERS_START(1, 1)
		Z_PARAM_LONG(id)
	ZEND_PARSE_PARAMETERS_END();

	hook();
	response_release();
	/* Whatever was printed between requests goes to the log, and the
	 * output layer starts again, as at a request's startup. */
	php_output_end_all();
	php_output_deactivate();
	php_output_activate();
	SG(headers_sent) = 0;
	/* sapi_send_headers() keeps the default Content-Type it sent here;
	 * sapi_deactivate() would free it at the end of a request. */
	if (SG(sapi_headers).mimetype) {
		efree(SG(sapi_headers).mimetype);
		SG(sapi_headers).mimetype = NULL;
	}
	resp.saved_no_headers = SG(request_info).no_headers;
	SG(request_info).no_headers = 0;
	resp.id = (uint32_t) id;
	resp.failed = false;
	resp.done = false;
	resp.head_held = false;
	resp.body_at = NO_FRAME;
	resp.buf.len = 0;
	resp.active = true;
	start_output();
}
/* }}} */

/* {{{ proto void hearth_response_drop_header(string $line)
   The head leaves out the first header line that is $line, or $line and
   attributes after a ";": the session cookie the worker's own session_id()
   call made PHP send, which PHP would not send to a client whose cookie
   carried that id. */
PHP_FUNCTION(hearth_response_drop_header)
{
	zend_string *line;

	ZEND_PARSE_PARAMETERS_START(1, 1)
		Z_PARAM_STR(line)
	ZEND_PARSE_PARAMETERS_END();

	if (!resp.active) {
		return;
	}
	free(resp.drop);
	resp.drop = malloc(ZSTR_LEN(line));
	resp.drop_len = resp.drop ? ZSTR_LEN(line) : 0;
	if (resp.drop) {
		memcpy(resp.drop, ZSTR_VAL(line), ZSTR_LEN(line));
	}
}
/* }}} */

/* {{{ proto void hearth_response_output_end()
   Ends every output buffer into the response and sends the headers if no
   output has, as at the end of a PHP request. */
PHP_FUNCTION(hearth_response_output_end)
{
	ZEND_PARSE_PARAMETERS_NONE();
	response_output_end();
}
/* }}} */

/* {{{ proto bool hearth_response_end(int $flags, string $report = "")
   Ends the response with an END frame of $flags, whose payload is $report
   (the worker's report, with the REPORT flag): what is held goes to
   Hearth. With the DETACHED flag (fastcgi_finish_request()) the request
   goes on and its output is dropped. False when Hearth could not be
   written to. */
PHP_FUNCTION(hearth_response_end)
{
	zend_long flags;
	zend_string *report = NULL;

	ZEND_PARSE_PARAMETERS_START(1, 2)
		Z_PARAM_LONG(flags)
		Z_PARAM_OPTIONAL
		Z_PARAM_STR(report)
	ZEND_PARSE_PARAMETERS_END();

	if (!resp.active) {
		RETURN_TRUE;
	}
	if (!resp.done) {
		response_output_end();
		size_t at = frame_start(KIND_END, (uint16_t) flags);
		if (report) {
			out_append(ZSTR_VAL(report), ZSTR_LEN(report));
			frame_done(at);
		}
		out_send(true);
		resp.done = true;
	}
	bool ok = !resp.failed;
	if (!(flags & FLAG_DETACHED)) {
		response_release();
		/* Between requests the output layer is as after a request's
		 * shutdown: nothing sent, so the library can put back settings
		 * PHP refuses to change once output has gone
		 * (zlib.output_compression). */
		php_output_deactivate();
		php_output_activate();
	}
	RETURN_BOOL(ok);
}
/* }}} */

/* {{{ proto void hearth_request_end()
   Ends the request hearth_request_begin() started: deletes the uploads the
   app did not move, closes the body, puts back the worker's own request,
   and forgets its response. */
PHP_FUNCTION(hearth_request_end)
{
	ZEND_PARSE_PARAMETERS_NONE();
	response_release();
	request_end();
}
/* }}} */

/* {{{ Settings a request changed
   PHP keeps every setting changed at runtime (ini_set(), error_reporting(),
   set_include_path(), set_time_limit()...) in EG(modified_ini_directives),
   with its value from before the first change, and puts them all back when
   a request ends. A worker's requests never end that way, so the library
   puts back what each one changed; these two functions tell it what that
   is from PHP's own record, at the cost of a walk over the few settings
   ever changed, where comparing all ~240 from PHP code costs ~11 µs. */

/* The value of each setting changed before hearth_ini_mark() (the app's
 * boot), at that moment: what the later requests start from. */
static HashTable *ini_marks;

static void ini_marks_release(void)
{
	if (ini_marks) {
		zend_hash_destroy(ini_marks);
		FREE_HASHTABLE(ini_marks);
		ini_marks = NULL;
	}
}

static bool ini_same(const zend_string *a, const zend_string *b)
{
	if (!a || !b) {
		return a == b;
	}
	return zend_string_equals(a, b);
}

/* {{{ proto void hearth_ini_mark()
   Takes the settings as they are now (once the app has booted) as what
   every request starts from. */
PHP_FUNCTION(hearth_ini_mark)
{
	ZEND_PARSE_PARAMETERS_NONE();
	ini_marks_release();
	ALLOC_HASHTABLE(ini_marks);
	zend_hash_init(ini_marks, 8, NULL, ZVAL_PTR_DTOR, 0);
	if (!EG(modified_ini_directives)) {
		return;
	}
	zend_ini_entry *entry;
	ZEND_HASH_MAP_FOREACH_PTR(EG(modified_ini_directives), entry) {
		zval value;
		if (entry->value) {
			ZVAL_STR_COPY(&value, entry->value);
		} else {
			ZVAL_NULL(&value);
		}
		zend_hash_update(ini_marks, entry->name, &value);
	} ZEND_HASH_FOREACH_END();
}
/* }}} */

/* {{{ proto list<string> hearth_ini_changed()
   The names of the settings whose value differs from the one
   hearth_ini_mark() took (or, for one first changed since, from its value
   before that change), ini_restore()d settings included. */
PHP_FUNCTION(hearth_ini_changed)
{
	ZEND_PARSE_PARAMETERS_NONE();
	array_init(return_value);
	HashTable *modified = EG(modified_ini_directives);
	if (modified) {
		zend_ini_entry *entry;
		ZEND_HASH_MAP_FOREACH_PTR(modified, entry) {
			zval *mark = ini_marks ? zend_hash_find(ini_marks, entry->name) : NULL;
			const zend_string *start = mark
				? (Z_TYPE_P(mark) == IS_STRING ? Z_STR_P(mark) : NULL)
				: entry->orig_value;
			if (!ini_same(start, entry->value)) {
				add_next_index_str(return_value, zend_string_copy(entry->name));
			}
		} ZEND_HASH_FOREACH_END();
	}
	if (!ini_marks) {
		return;
	}
	/* A setting the boot changed and a request then ini_restore()d is no
	 * longer in PHP's record, and holds php.ini's value again. */
	zend_string *name;
	zval *mark;
	ZEND_HASH_MAP_FOREACH_STR_KEY_VAL(ini_marks, name, mark) {
		if (modified && zend_hash_exists(modified, name)) {
			continue;
		}
		zend_ini_entry *entry = zend_hash_find_ptr(EG(ini_directives), name);
		if (entry && !ini_same(Z_TYPE_P(mark) == IS_STRING ? Z_STR_P(mark) : NULL, entry->value)) {
			add_next_index_str(return_value, zend_string_copy(name));
		}
	} ZEND_HASH_FOREACH_END();
}
/* }}} */

/* }}} */

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_hearth_request_begin, 0, 4, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, params, IS_ARRAY, 0)
	ZEND_ARG_TYPE_INFO(0, server, IS_ARRAY, 0)
	ZEND_ARG_TYPE_INFO(0, body, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO(0, bodyFile, IS_STRING, 1)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_hearth_request_end, 0, 0, IS_VOID, 0)
ZEND_END_ARG_INFO()

#define arginfo_hearth_request_shutdown_functions arginfo_hearth_request_end

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_hearth_response_begin, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, id, IS_LONG, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_hearth_response_drop_header, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, line, IS_STRING, 0)
ZEND_END_ARG_INFO()

#define arginfo_hearth_response_output_end arginfo_hearth_request_end
#define arginfo_hearth_ini_mark arginfo_hearth_request_end

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_hearth_ini_changed, 0, 0, IS_ARRAY, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_hearth_response_end, 0, 1, _IS_BOOL, 0)
	ZEND_ARG_TYPE_INFO(0, flags, IS_LONG, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, report, IS_STRING, 0, "\"\"")
ZEND_END_ARG_INFO()

static const zend_function_entry hearth_functions[] = {
	PHP_FE(hearth_response_begin, arginfo_hearth_response_begin)
	PHP_FE(hearth_response_drop_header, arginfo_hearth_response_drop_header)
	PHP_FE(hearth_response_output_end, arginfo_hearth_response_output_end)
	PHP_FE(hearth_response_end, arginfo_hearth_response_end)
	PHP_FE(hearth_request_begin, arginfo_hearth_request_begin)
	PHP_FE(hearth_request_shutdown_functions, arginfo_hearth_request_shutdown_functions)
	PHP_FE(hearth_request_end, arginfo_hearth_request_end)
	PHP_FE(hearth_ini_mark, arginfo_hearth_ini_mark)
	PHP_FE(hearth_ini_changed, arginfo_hearth_ini_changed)
	PHP_FE_END
};

static PHP_RINIT_FUNCTION(hearth)
{
	exiting = false;
	return SUCCESS;
}

/* The worker exits in the middle of a request (exit, a fatal error): give
 * PHP back its own request before it shuts down. */
static PHP_RSHUTDOWN_FUNCTION(hearth)
{
	exiting = true;
	response_release();
	request_end();
	ini_marks_release();
	return SUCCESS;
}

static PHP_MINFO_FUNCTION(hearth)
{
	php_info_print_table_start();
	php_info_print_table_header(2, "Hearth worker support", "enabled");
	php_info_print_table_row(2, "Version", PHP_HEARTH_VERSION);
	php_info_print_table_end();
}

zend_module_entry hearth_module_entry = {
	STANDARD_MODULE_HEADER,
	"hearth",
	hearth_functions,
	NULL,
	NULL,
	PHP_RINIT(hearth),
	PHP_RSHUTDOWN(hearth),
	PHP_MINFO(hearth),
	PHP_HEARTH_VERSION,
	STANDARD_MODULE_PROPERTIES
};

#ifdef COMPILE_DL_HEARTH
ZEND_GET_MODULE(hearth)
#endif
