// SPDX-License-Identifier: MIT
/*
 * Configuration: the PPIPE_* variables, parsed once from the environment
 * at load. Everything about an option (name, type, default, range, help)
 * comes from options.def through X-macros; nothing here lists options by
 * hand.
 *
 * pp_config_load() runs from a constructor, possibly before libc is fully
 * set up, so this file never calls getenv, malloc or stdio: it walks the
 * envp array it is given, works on fixed buffers, and prints through
 * pp_warn() (vsnprintf to the stack, one raw write).
 */
#include "config.h"

#include "compiler.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PP_NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* How much of a bad value or unknown name a warning quotes. */
#define PP_QUOTE_MAX 96
/* Unknown names longer than this get no "did you mean". */
#define PP_SUGGEST_MAX 63
/* Variables no libppipe option uses, reserved for the test preloads. */
#define PP_TEST_PREFIX "PPIPE_TEST_"
/* Set by libppipe itself for the programs a process tree execs (registry.c). */
#define PP_REGISTRY_VAR "PPIPE_REGISTRY"

enum pp_opt_type { PP_T_size, PP_T_int, PP_T_bool, PP_T_enum, PP_T_fdset, PP_T_string };

struct pp_opt;
typedef int pp_set_fn(struct pp_config *c, const struct pp_opt *o, const char *v);
typedef void pp_show_fn(const struct pp_config *c, const struct pp_opt *o, char *buf, size_t len);

struct pp_opt {
	const char *env;
	const char *help;
	enum pp_opt_type type;
	uint64_t min_u, max_u, def_u; /* size; max_u is also a string's longest length */
	int64_t min_i, max_i, def_i; /* int */
	const char *const *names; /* enum: the names, in enum order, NULL-terminated */
	pp_set_fn *set; /* parses into its field; -EINVAL leaves the field alone */
	pp_show_fn *show; /* formats its field's current value */
};

PP_HOT unsigned int pp_used;
PP_HOT bool pp_is_active;

PP_HOT struct pp_config pp_cfg = {
/*
 * The table starts out holding exactly the defaults, so that a process
 * without PPIPE_ variables runs no parser at all. (Before the constructor,
 * nothing is tracked anyway: libppipe is not active yet.)
 */
#define PP_INIT_size(f, d) .f = (d),
#define PP_INIT_int(f, d) .f = (d),
#define PP_INIT_bool(f, d) .f = (d),
#define PP_INIT_enum(f, d) .f = (d),
/* The one fdset option's default is "all" (test-config checks the whole table against it). */
#define PP_INIT_fdset(f, d) .f = { .all = true },
#define PP_INIT_string(f, d) .f = d,
#define PP_OPT(f, e, t, d, mn, mx, nm, h) PP_INIT_##t(f, d)
#include "options.def"
#undef PP_OPT
};

/* ---- small string helpers, ASCII only (no locale, no libc state) ---- */

PP_START static bool pp_blank(char c)
{
	return c == ' ' || c == '\t';
}

PP_START static char pp_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

PP_START static bool pp_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Does the span @s/@n equal @word, ignoring ASCII case? */
PP_START static bool pp_span_is(const char *s, size_t n, const char *word)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!word[i] || pp_lower(s[i]) != pp_lower(word[i]))
			return false;
	return !word[i];
}

/* Trims blanks off both ends of the span. */
PP_START static void pp_trim(const char **s, size_t *n)
{
	while (*n && pp_blank(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && pp_blank((*s)[*n - 1]))
		(*n)--;
}

/* Parses the leading decimal digits of the span; returns how many, 0 on overflow or none. */
PP_START static size_t pp_span_digits(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n && pp_digit(s[i]); i++) {
		unsigned int d = (unsigned int)(s[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return 0;
		v = v * 10 + d;
	}
	*out = v;
	return i;
}

/* A string option's default (no vsnprintf at start-up: it is more code to map). */
static void pp_copy_default(char *dst, size_t size, const char *d)
{
	size_t i = 0;

	for (; i + 1 < size && d[i]; i++)
		dst[i] = d[i];
	dst[i] = '\0';
}

/* snprintf that never reports more than it wrote. */
PP_START PP_PRINTF(3, 4) static size_t pp_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!len)
		return 0;
	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n < len ? (size_t)n : len - 1;
}

/*
 * Copies the span @s/@n for a message: control bytes become \xNN, and more
 * than @max bytes are cut with "...". Always NUL-terminates @buf.
 */
PP_START static void pp_quote(const char *s, size_t n, size_t max, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	if (!len)
		return;
	for (i = 0; i < n && i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f) {
			if (o + 4 >= len)
				break;
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		} else {
			if (o + 1 >= len)
				break;
			buf[o++] = (char)c;
		}
	}
	if (i < n && o + 3 < len) {
		buf[o++] = '.';
		buf[o++] = '.';
		buf[o++] = '.';
	}
	buf[o] = '\0';
}

/* ---- pure parsers ---- */

PP_START int pp_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned int shift = 0;
	uint64_t v;
	size_t n, d;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	pp_trim(&s, &n);
	d = pp_span_digits(s, n, &v);
	if (!d)
		return -EINVAL;
	s += d;
	n -= d;
	if (n) {
		switch (pp_lower(*s)) {
		case 'k':
			shift = 10;
			break;
		case 'm':
			shift = 20;
			break;
		case 'g':
			shift = 30;
			break;
		}
		if (shift) {
			s++;
			n--;
		}
	}
	/* Optional unit: "B" after anything, "iB" only after k/m/g. */
	if (n && !(pp_span_is(s, n, "b") || (shift && pp_span_is(s, n, "ib"))))
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	v <<= shift;
	if (v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

PP_START int pp_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg = false;
	uint64_t mag;
	int64_t v;
	size_t n, d;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	pp_trim(&s, &n);
	if (n && (*s == '-' || *s == '+')) {
		neg = *s == '-';
		s++;
		n--;
	}
	d = pp_span_digits(s, n, &mag);
	if (!d || d != n)
		return -EINVAL;
	if (neg) {
		if (mag > (uint64_t)INT64_MAX + 1)
			return -EINVAL;
		v = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
	} else {
		if (mag > (uint64_t)INT64_MAX)
			return -EINVAL;
		v = (int64_t)mag;
	}
	if (v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

PP_START int pp_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	size_t n;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	pp_trim(&s, &n);
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (pp_span_is(s, n, yes[i])) {
			*out = true;
			return 0;
		}
		if (pp_span_is(s, n, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

PP_START int pp_parse_enum(const char *s, const char *const *names, unsigned int *out)
{
	size_t n;

	if (!s || !names)
		return -EINVAL;
	n = strlen(s);
	pp_trim(&s, &n);
	for (unsigned int i = 0; names[i]; i++) {
		if (pp_span_is(s, n, names[i])) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* One item of an fd list: a number below PP_FDS_LIST_MAX or stdin/stdout/stderr. */
PP_START static int pp_parse_fd_item(const char *s, size_t n, unsigned int *fd)
{
	static const char *const std[] = { "stdin", "stdout", "stderr" };
	uint64_t v;

	pp_trim(&s, &n);
	for (unsigned int i = 0; i < ARRAY_SIZE(std); i++) {
		if (pp_span_is(s, n, std[i])) {
			*fd = i;
			return 0;
		}
	}
	if (!n || pp_span_digits(s, n, &v) != n || v >= PP_FDS_LIST_MAX)
		return -EINVAL;
	*fd = (unsigned int)v;
	return 0;
}

PP_START int pp_parse_fdset(const char *s, struct pp_fdset *out)
{
	struct pp_fdset set;
	size_t n;

	if (!s)
		return -EINVAL;
	memset(&set, 0, sizeof(set));
	n = strlen(s);
	pp_trim(&s, &n);
	if (pp_span_is(s, n, "all")) {
		set.all = true;
	} else if (pp_span_is(s, n, "none")) {
		set.none = true;
	} else {
		const char *end = s + n;

		for (;;) {
			const char *comma = memchr(s, ',', (size_t)(end - s));
			const char *stop = comma ? comma : end;
			unsigned int fd;

			if (pp_parse_fd_item(s, (size_t)(stop - s), &fd))
				return -EINVAL;
			set.bits[fd / 64] |= UINT64_C(1) << (fd % 64);
			if (!comma)
				break;
			s = comma + 1;
		}
	}
	*out = set;
	return 0;
}

/* ---- one function per option to parse and to show its field ---- */

PP_START static int pp_opt_size(const struct pp_opt *o, const char *v, uint64_t *x)
{
	if (pp_parse_size(v, 0, UINT64_MAX, x))
		return -EINVAL;
	if (*x == o->def_u) /* the default may lie outside min..max (0 = automatic) */
		return 0;
	return *x < o->min_u || *x > o->max_u ? -1 : 0;
}

PP_START static int pp_opt_int(const struct pp_opt *o, const char *v, int64_t *x)
{
	if (pp_parse_int(v, INT64_MIN, INT64_MAX, x))
		return -EINVAL;
	if (*x == o->def_i)
		return 0;
	return *x < o->min_i || *x > o->max_i ? -1 : 0;
}

PP_START static int pp_opt_string(const struct pp_opt *o, const char *v, char *dst, size_t size)
{
	size_t n = strlen(v);

	if (n > o->max_u || n >= size)
		return -EINVAL;
	memcpy(dst, v, n + 1);
	return 0;
}

PP_START static void pp_show_enum(const struct pp_opt *o, unsigned int v, char *buf, size_t len)
{
	for (unsigned int i = 0; o->names[i]; i++) {
		if (i == v) {
			pp_fmt(buf, len, "%s", o->names[i]);
			return;
		}
	}
	pp_fmt(buf, len, "%u", v);
}

PP_START static void pp_show_fdset(const struct pp_fdset *set, char *buf, size_t len)
{
	size_t o = 0;

	if (set->all) {
		pp_fmt(buf, len, "all");
		return;
	}
	if (set->none) {
		pp_fmt(buf, len, "none");
		return;
	}
	pp_fmt(buf, len, "%s", "");
	for (unsigned int fd = 0; fd < PP_FDS_LIST_MAX; fd++)
		if ((set->bits[fd / 64] >> (fd % 64)) & 1)
			o += pp_fmt(buf + o, len - o, "%s%u", o ? "," : "", fd);
}

PP_START static void pp_show_string(const char *s, char *buf, size_t len)
{
	if (!*s)
		pp_fmt(buf, len, "\"\"");
	else
		pp_quote(s, strlen(s), SIZE_MAX, buf, len);
}

#define PP_SET_size(dst, o, v)     \
	uint64_t x;                \
	if (pp_opt_size(o, v, &x)) \
		return -EINVAL;    \
	dst = x;                   \
	return 0;
#define PP_SET_int(dst, o, v)     \
	int64_t x;                \
	if (pp_opt_int(o, v, &x)) \
		return -EINVAL;   \
	dst = x;                  \
	return 0;
#define PP_SET_bool(dst, o, v)    \
	bool x;                   \
	(void)o;                  \
	if (pp_parse_bool(v, &x)) \
		return -EINVAL;   \
	dst = x;                  \
	return 0;
#define PP_SET_enum(dst, o, v)              \
	unsigned int x;                     \
	if (pp_parse_enum(v, o->names, &x)) \
		return -EINVAL;             \
	dst = x;                            \
	return 0;
#define PP_SET_fdset(dst, o, v) \
	(void)o;                \
	return pp_parse_fdset(v, &dst);
#define PP_SET_string(dst, o, v) return pp_opt_string(o, v, dst, sizeof(dst));

#define PP_SHOW_size(src, o, buf, len) \
	(void)o;                       \
	pp_fmt(buf, len, "%" PRIu64, (uint64_t)src);
#define PP_SHOW_int(src, o, buf, len) \
	(void)o;                      \
	pp_fmt(buf, len, "%" PRId64, (int64_t)src);
#define PP_SHOW_bool(src, o, buf, len) \
	(void)o;                       \
	pp_fmt(buf, len, "%d", src ? 1 : 0);
#define PP_SHOW_enum(src, o, buf, len) pp_show_enum(o, (unsigned int)src, buf, len);
#define PP_SHOW_fdset(src, o, buf, len) \
	(void)o;                        \
	pp_show_fdset(&src, buf, len);
#define PP_SHOW_string(src, o, buf, len) \
	(void)o;                         \
	pp_show_string(src, buf, len);

#define PP_OPT(f, e, t, d, mn, mx, nm, h)                                                     \
	static int pp_set_##f(struct pp_config *c, const struct pp_opt *o, const char *v)     \
	{                                                                                     \
		PP_SET_##t(c->f, o, v)                                                        \
	}                                                                                     \
	static void pp_show_##f(const struct pp_config *c, const struct pp_opt *o, char *buf, \
				size_t len)                                                   \
	{                                                                                     \
		PP_SHOW_##t(c->f, o, buf, len)                                                \
	}
#include "options.def"
#undef PP_OPT

/* Compile-time checks of each row. */
#define PP_CHECK_size(f, e, d, mn, mx)                           \
	_Static_assert((mn) <= (mx), #e ": min above max");      \
	_Static_assert((d) == 0 || ((d) >= (mn) && (d) <= (mx)), \
		       #e ": default neither 0 nor within min..max");
#define PP_CHECK_int(f, e, d, mn, mx)                                         \
	_Static_assert((int64_t)(mn) <= (int64_t)(mx), #e ": min above max"); \
	_Static_assert((d) >= (mn) && (d) <= (mx), #e ": default outside min..max");
#define PP_CHECK_bool(f, e, d, mn, mx)
#define PP_CHECK_enum(f, e, d, mn, mx)
#define PP_CHECK_fdset(f, e, d, mn, mx)
#define PP_CHECK_string(f, e, d, mn, mx) \
	_Static_assert((mx) < sizeof(((struct pp_config *)0)->f), #e ": longer than its buffer");
#define PP_OPT(f, e, t, d, mn, mx, nm, h) PP_CHECK_##t(f, e, d, mn, mx)
#include "options.def"
#undef PP_OPT

/* Each row's field in struct pp_config (written by hand) has its type's C type. */
#define PP_FIELD(f) (((struct pp_config *)0)->f)
#define PP_CTYPE_size(f) __builtin_types_compatible_p(__typeof__(PP_FIELD(f)), uint64_t)
#define PP_CTYPE_int(f) __builtin_types_compatible_p(__typeof__(PP_FIELD(f)), int64_t)
#define PP_CTYPE_bool(f) __builtin_types_compatible_p(__typeof__(PP_FIELD(f)), bool)
#define PP_CTYPE_enum(f)                                                        \
	(__builtin_types_compatible_p(__typeof__(PP_FIELD(f)), unsigned int) || \
	 __builtin_types_compatible_p(__typeof__(PP_FIELD(f)), int))
#define PP_CTYPE_fdset(f) __builtin_types_compatible_p(__typeof__(PP_FIELD(f)), struct pp_fdset)
#define PP_CTYPE_string(f) __builtin_types_compatible_p(__typeof__(PP_FIELD(f)[0]), char)
#define PP_OPT(f, e, t, d, mn, mx, nm, h) \
	_Static_assert(PP_CTYPE_##t(f), #e ": its field is not a " #t);
#include "options.def"
#undef PP_OPT

/* Row numbers, for the few places that need one option's row. */
enum {
#define PP_OPT(f, e, t, d, mn, mx, nm, h) PP_OPT_##f,
#include "options.def"
#undef PP_OPT
	PP_OPT_COUNT
};

/* The default, for the types whose range check needs it. */
#define PP_DEF_size(d) .def_u = (d),
#define PP_DEF_int(d) .def_i = (d),
#define PP_DEF_bool(d)
#define PP_DEF_enum(d)
#define PP_DEF_fdset(d)
#define PP_DEF_string(d)

static const struct pp_opt pp_opts[] = {
#define PP_OPT(f, e, t, d, mn, mx, nm, h) \
	{ .env = #e,                      \
	  .help = h,                      \
	  .type = PP_T_##t,               \
	  .min_u = (uint64_t)(mn),        \
	  .max_u = (uint64_t)(mx),        \
	  .min_i = (int64_t)(mn),         \
	  .max_i = (int64_t)(mx),         \
	  .names = nm,                    \
	  .set = pp_set_##f,              \
	  .show = pp_show_##f,            \
	  PP_DEF_##t(d) },
#include "options.def"
#undef PP_OPT
};

_Static_assert(ARRAY_SIZE(pp_opts) == PP_OPT_COUNT, "one row per option");

#define PP_DEFAULT_size(dst, d) dst = (d);
#define PP_DEFAULT_int(dst, d) dst = (d);
#define PP_DEFAULT_bool(dst, d) dst = (d);
#define PP_DEFAULT_enum(dst, d) dst = (d);
#define PP_DEFAULT_fdset(dst, d) (void)pp_parse_fdset(d, &dst);
#define PP_DEFAULT_string(dst, d) pp_copy_default(dst, sizeof(dst), d);

PP_START void pp_config_defaults(struct pp_config *c)
{
	memset(c, 0, sizeof(*c));
#define PP_OPT(f, e, t, d, mn, mx, nm, h) PP_DEFAULT_##t(c->f, d)
#include "options.def"
#undef PP_OPT
}

PP_START static const char *pp_enum_name(unsigned int row, unsigned int v)
{
	const char *const *names = pp_opts[row].names;

	for (unsigned int i = 0; names[i]; i++)
		if (i == v)
			return names[i];
	return "?";
}

PP_START const char *pp_mode_name(enum pp_mode m)
{
	return pp_enum_name(PP_OPT_mode, m);
}

PP_START const char *pp_readers_name(enum pp_readers r)
{
	return pp_enum_name(PP_OPT_readers, r);
}

PP_START const char *pp_thp_name(enum pp_thp t)
{
	return pp_enum_name(PP_OPT_thp, t);
}

/* ---- the environment ---- */

/* What a value of @o must look like, for the warning. */
PP_START static void pp_expected(const struct pp_opt *o, char *buf, size_t len)
{
	size_t n = 0;

	switch (o->type) {
	case PP_T_size:
		if (o->def_u < o->min_u || o->def_u > o->max_u)
			n = pp_fmt(buf, len, "%" PRIu64 " or ", o->def_u);
		pp_fmt(buf + n, len - n, "a size between %" PRIu64 " and %" PRIu64, o->min_u,
		       o->max_u);
		break;
	case PP_T_int:
		if (o->def_i < o->min_i || o->def_i > o->max_i)
			n = pp_fmt(buf, len, "%" PRId64 " or ", o->def_i);
		pp_fmt(buf + n, len - n, "an integer between %" PRId64 " and %" PRId64, o->min_i,
		       o->max_i);
		break;
	case PP_T_bool:
		pp_fmt(buf, len, "a boolean (1/true/yes/on or 0/false/no/off)");
		break;
	case PP_T_enum:
		n = pp_fmt(buf, len, "one of ");
		for (unsigned int i = 0; o->names[i]; i++)
			n += pp_fmt(buf + n, len - n, "%s%s", i ? "|" : "", o->names[i]);
		break;
	case PP_T_fdset:
		pp_fmt(buf, len, "all, none or a comma list of fds 0-%d and stdin/stdout/stderr",
		       PP_FDS_LIST_MAX - 1);
		break;
	case PP_T_string:
		pp_fmt(buf, len, "at most %" PRIu64 " characters long", o->max_u);
		break;
	}
}

/* Length of the name part of an environment entry. */
PP_START static size_t pp_env_name_len(const char *e)
{
	const char *eq = strchr(e, '=');

	return eq ? (size_t)(eq - e) : strlen(e);
}

PP_START static const struct pp_opt *pp_opt_find(const char *name, size_t n)
{
	for (size_t i = 0; i < ARRAY_SIZE(pp_opts); i++)
		if (strlen(pp_opts[i].env) == n && !memcmp(pp_opts[i].env, name, n))
			return &pp_opts[i];
	return NULL;
}

/* Edit distance between @a/@n and @b, ignoring ASCII case; @n <= PP_SUGGEST_MAX. */
PP_START static size_t pp_distance(const char *a, size_t n, const char *b)
{
	size_t row[PP_SUGGEST_MAX + 1], m = strlen(b);

	for (size_t i = 0; i <= n; i++)
		row[i] = i;
	for (size_t j = 1; j <= m; j++) {
		size_t diag = row[0];

		row[0] = j;
		for (size_t i = 1; i <= n; i++) {
			size_t up = row[i];
			size_t best = diag + (pp_lower(a[i - 1]) != pp_lower(b[j - 1]));

			if (up + 1 < best)
				best = up + 1;
			if (row[i - 1] + 1 < best)
				best = row[i - 1] + 1;
			diag = up;
			row[i] = best;
		}
	}
	return row[n];
}

/* The option an unknown name was probably meant to be, or NULL. */
PP_START static const char *pp_suggest(const char *name, size_t n)
{
	const char *best = NULL;
	size_t best_d = 3; /* suggest only within two edits */

	if (n > PP_SUGGEST_MAX)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(pp_opts); i++) {
		size_t d = pp_distance(name, n, pp_opts[i].env);

		if (d < best_d) {
			best_d = d;
			best = pp_opts[i].env;
		}
	}
	return best;
}

PP_START static void pp_warn_unknown(char *const *envp, size_t idx)
{
	const char *e = envp[idx], *hint;
	size_t n = pp_env_name_len(e);
	char shown[PP_QUOTE_MAX + 16];

	if (n >= sizeof(PP_TEST_PREFIX) - 1 &&
	    !memcmp(e, PP_TEST_PREFIX, sizeof(PP_TEST_PREFIX) - 1))
		return;
	if (n == sizeof(PP_REGISTRY_VAR) - 1 && !memcmp(e, PP_REGISTRY_VAR, n))
		return;
	/* Once per name, however often the environment repeats it. */
	for (size_t j = 0; j < idx; j++)
		if (pp_env_name_len(envp[j]) == n && !memcmp(envp[j], e, n))
			return;
	pp_quote(e, n, PP_QUOTE_MAX, shown, sizeof(shown));
	hint = pp_suggest(e, n);
	if (hint)
		pp_warn("%s is not a libppipe option, ignored (did you mean %s?)", shown, hint);
	else
		pp_warn("%s is not a libppipe option, ignored", shown);
}

PP_START static void pp_warn_bad(const struct pp_opt *o, const char *v)
{
	char shown[PP_QUOTE_MAX + 16], expect[192], now[64];

	pp_quote(v, strlen(v), PP_QUOTE_MAX, shown, sizeof(shown));
	pp_expected(o, expect, sizeof(expect));
	o->show(&pp_cfg, o, now, sizeof(now));
	pp_warn("%s=%s is not %s; using %s", o->env, shown, expect, now);
}

/* Is a PPIPE_STATS value a path (rather than off or stderr)? */
PP_START static bool pp_stats_is_path(const char *s)
{
	return s[0] && strcmp(s, "0") && strcmp(s, "1");
}

PP_START void pp_config_load_env(char *const *envp, bool secure)
{
	bool seen[ARRAY_SIZE(pp_opts)] = { false };
	char dropped[PP_QUOTE_MAX + 16] = "";

	pp_config_defaults(&pp_cfg);
	for (size_t i = 0; envp && envp[i]; i++) {
		const char *e = envp[i], *v;
		const struct pp_opt *o;
		size_t n;

		if (strncmp(e, "PPIPE_", 6))
			continue;
		n = pp_env_name_len(e);
		o = pp_opt_find(e, n);
		if (!o) {
			pp_warn_unknown(envp, i);
			continue;
		}
		/* The first definition wins, as for getenv(). */
		if (!e[n] || seen[o - pp_opts])
			continue;
		seen[o - pp_opts] = true;
		v = e + n + 1;
		/* Empty is unset, except where empty means something. */
		if (!*v && o->type != PP_T_string)
			continue;
		if (o->set(&pp_cfg, o, v))
			pp_warn_bad(o, v);
	}

	pp_log_set_debug(pp_cfg.debug);
	/* secure_getenv semantics: a setuid program writes no file for its caller. */
	if (secure && pp_stats_is_path(pp_cfg.stats)) {
		pp_quote(pp_cfg.stats, strlen(pp_cfg.stats), PP_QUOTE_MAX, dropped,
			 sizeof(dropped));
		pp_cfg.stats[0] = '\0';
		pp_debug("PPIPE_STATS=%s ignored: the process is setuid/setgid (AT_SECURE); "
			 "statistics stay off",
			 dropped);
	}
	if (secure && pp_cfg.counters[0]) {
		pp_quote(pp_cfg.counters, strlen(pp_cfg.counters), PP_QUOTE_MAX, dropped,
			 sizeof(dropped));
		pp_cfg.counters[0] = '\0';
		pp_debug("PPIPE_COUNTERS=%s ignored: the process is setuid/setgid (AT_SECURE)",
			 dropped);
	}
	pp_cfg.watch = pp_cfg.debug || pp_cfg.counters[0] ||
		       (pp_cfg.stats[0] && strcmp(pp_cfg.stats, "0"));
}

PP_START bool pp_config_load(char *const *envp)
{
	/*
	 * No PPIPE_ variable (nearly every process): the table's initial values
	 * are the defaults. (No strncmp: its first call through the PLT would
	 * cost more than this whole loop.)
	 */
	bool any = false;

	for (char *const *e = envp; e && *e; e++) {
		if ((*e)[0] != 'P' || !pp_has_prefix(*e, "PPIPE_"))
			continue;
		any = true;
		/* The registry's own variable (a program started by a libppipe tree) sets no option. */
		if (!pp_has_prefix(*e + 6, "REGISTRY=")) {
			pp_config_load_env(envp, getauxval(AT_SECURE) != 0);
			return true;
		}
	}
	return any;
}

PP_START void pp_config_dump(int fd)
{
	char line[6 * PP_FDS_LIST_MAX + 512];
	long pid = syscall(SYS_getpid);

	for (size_t i = 0; i < ARRAY_SIZE(pp_opts); i++) {
		const struct pp_opt *o = &pp_opts[i];
		size_t n;

		n = pp_fmt(line, sizeof(line), "libppipe[%ld]: %s=", pid, o->env);
		o->show(&pp_cfg, o, line + n, sizeof(line) - n);
		n += strlen(line + n);
		n += pp_fmt(line + n, sizeof(line) - n, "  # %s\n", o->help);
		if (line[n - 1] != '\n')
			line[n - 1] = '\n';
		pp_log_raw(fd, line, n);
	}
}
