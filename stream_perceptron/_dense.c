/* The dense fast path in C: the block scanners and the exact sequential kernels of the
 * learners' blocks (the learners' rules are _rules.h's, which the dict API's _speedups.c runs
 * too), and the loop of --join-key's block plan (join_plan; the reference:
 * stream_perceptron/join/blocks.py).
 *
 * The Python glue is stream_perceptron/formats/scan.py and learners/_*_kernel.py. Each kernel
 * does the floating-point operations of the learner's own per-record Python code (the
 * reference: Perceptron._learn/_score, MulticlassPerceptron._learn/_note_norm/_scores), in the
 * same order, every sum a plain left fold from 0.0 in feature order; the CSV scanner gives
 * float()'s value of every cell. tests/fast holds them to the same bits. Compiled with
 * -ffp-contract=off: every multiply and add is rounded on its own, as in Python. They release
 * the GIL while they run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#define E10_MIN (-348)
#define E10_MAX 347
#define N_POW10 (E10_MAX - E10_MIN + 1)

static uint64_t pow10_lo[N_POW10];
static uint64_t pow10_hi[N_POW10];
static int tables_ready = 0;

static const double pow10_exact[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static const uint64_t TWO53 = (uint64_t)1 << 53;

/* -- 128-bit products -------------------------------------------------------------------- */

static inline void mul64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
#ifdef __SIZEOF_INT128__
    unsigned __int128 p = (unsigned __int128)a * b;
    *hi = (uint64_t)(p >> 64);
    *lo = (uint64_t)p;
#else
    uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
    uint64_t p0 = a_lo * b_lo, p1 = a_lo * b_hi, p2 = a_hi * b_lo, p3 = a_hi * b_hi;
    uint64_t mid = (p0 >> 32) + (p1 & 0xFFFFFFFFu) + (p2 & 0xFFFFFFFFu);
    *hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
    *lo = (mid << 32) | (p0 & 0xFFFFFFFFu);
#endif
}

static inline int leading_zeros(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_clzll(x);
#else
    int n = 0;
    while (!(x >> 63)) {
        x <<= 1;
        n++;
    }
    return n;
#endif
}

/* man * 10**exp10 correctly rounded, for man > 0; 0 when undecided (float() decides). */
static int eisel_lemire(uint64_t man, int64_t exp10, double *out)
{
    if (exp10 < E10_MIN || exp10 > E10_MAX)
        return 0;
    int clz = leading_zeros(man);
    man <<= clz;
    int64_t exp2 = ((217706 * exp10) >> 16) + 64 + 1023 - clz;
    int64_t k = exp10 - E10_MIN;
    uint64_t x_hi, x_lo;
    mul64(man, pow10_hi[k], &x_hi, &x_lo);
    if ((x_hi & 0x1FF) == 0x1FF && x_lo + man < man) {
        uint64_t y_hi, y_lo;
        mul64(man, pow10_lo[k], &y_hi, &y_lo);
        uint64_t merged_hi = x_hi, merged_lo = x_lo + y_hi;
        if (merged_lo < x_lo)
            merged_hi += 1;
        if ((merged_hi & 0x1FF) == 0x1FF && merged_lo == UINT64_MAX && y_lo + man < man)
            return 0;
        x_hi = merged_hi;
        x_lo = merged_lo;
    }
    uint64_t msb = x_hi >> 63;
    uint64_t mantissa = x_hi >> (msb + 9);
    exp2 -= 1 - (int64_t)msb;
    if (x_lo == 0 && (x_hi & 0x1FF) == 0 && (mantissa & 3) == 1)
        return 0; /* halfway between two doubles, maybe */
    mantissa += mantissa & 1;
    mantissa >>= 1;
    if (mantissa >> 53) {
        mantissa >>= 1;
        exp2 += 1;
    }
    if (exp2 <= 0 || exp2 >= 0x7FF)
        return 0; /* subnormal, infinite */
    /* mantissa in [2**52, 2**53): the double with that significand and biased exponent exp2
       (= ldexp(mantissa, exp2 - 1075), without the call) */
    uint64_t bits = (mantissa & ((((uint64_t)1) << 52) - 1)) | ((uint64_t)exp2 << 52);
    memcpy(out, &bits, sizeof bits);
    return 1;
}

/* man * 10**exp10 for the plain form, with the sign bit neg: Clinger's exact case, else
   Eisel-Lemire; *ok 0 when neither decides. The usual case stays in registers, without a
   branch on the sign (signs are random in data: a branch would miss half the time). */
static inline double signed_decimal(uint64_t man, int64_t exp10, int neg, int *ok)
{
    double v;
    *ok = 1;
    if (man <= TWO53 && exp10 >= -22 && exp10 <= 22) {
        v = (double)man; /* man 0 gives +0.0, as below */
        v = exp10 >= 0 ? v * pow10_exact[exp10] : v / pow10_exact[-exp10];
    }
    else if (man == 0)
        v = 0.0;
    else {
        double out = 0.0;
        *ok = eisel_lemire(man, exp10, &out);
        v = out;
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof v);
    bits ^= (uint64_t)(neg != 0) << 63; /* -v, exactly */
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* The number of eight digit values (0-9 a byte; little-endian: the first digit is the lowest
   byte), with three multiplications (fast_float's trick). */
static inline uint64_t digit_values(uint64_t v)
{
    v = (v * 10) + (v >> 8);
    return (((v & 0x000000FF000000FFu) * (100 + (1000000ull << 32))) +
            (((v >> 16) & 0x000000FF000000FFu) * (1 + (10000ull << 32)))) >>
           32;
}

/* Eight ASCII digits at p, as a number; 0 when they are not all digits (fast_float's trick). */
static inline int eight_digits(const unsigned char *p, uint64_t *out)
{
    uint64_t v;
    memcpy(&v, p, 8);
    if (((v & 0xF0F0F0F0F0F0F0F0u) | (((v + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) >> 4)) !=
        0x3333333333333333u)
        return 0;
    *out = digit_values(v - 0x3030303030303030u);
    return 1;
}

/* The digits at buf[i...] appended to *man (wrapping past 19 digits: the callers count them
   and give up then); returns the index after the last digit. buf ends with a non-digit. */
static inline Py_ssize_t read_digits(const unsigned char *buf, Py_ssize_t i, Py_ssize_t size,
                                     uint64_t *man)
{
    uint64_t m = *man, eight;
    /* eight at a time while there are; a shorter run (the usual number: "0.75846," or
       "2.8963, ") is told by its sixth or eighth byte, one or two tests */
    while (i + 8 <= size && (unsigned)buf[i + 5] - '0' <= 9 && (unsigned)buf[i + 7] - '0' <= 9 &&
           eight_digits(buf + i, &eight)) {
        m = m * 100000000u + eight;
        i += 8;
    }
    unsigned dig = (unsigned)buf[i] - '0';
    while (dig <= 9) {
        m = m * 10 + dig;
        dig = (unsigned)buf[++i] - '0';
    }
    *man = m;
    return i;
}

/* The exponent after an 'e' or 'E' at buf[i - 1]: an optional sign and digits, added to
   *exp10; returns the index after it, or -1 when there is no digit. */
static inline Py_ssize_t read_exponent(const unsigned char *buf, Py_ssize_t i, int64_t *exp10)
{
    int neg = buf[i] == '-';
    if (neg || buf[i] == '+')
        i++;
    int64_t e = 0;
    Py_ssize_t e0 = i;
    unsigned dig = (unsigned)buf[i] - '0';
    while (dig <= 9) {
        if (e < 100000)
            e = e * 10 + dig;
        dig = (unsigned)buf[++i] - '0';
    }
    if (i == e0)
        return -1;
    *exp10 += neg ? -e : e;
    return i;
}

static inline int is_space(unsigned char c) { return c == 32 || (c >= 9 && c <= 13); }

/* The digits at buf[*i..end) appended to *man, leading zeros not counted as significant;
   returns how many digits were read. *n_significant above 19: too many (*man incomplete). */
static Py_ssize_t read_significant(const unsigned char *buf, Py_ssize_t *i, Py_ssize_t end,
                                   uint64_t *man, int *n_significant)
{
    Py_ssize_t j = *i;
    while (j < end && buf[j] >= '0' && buf[j] <= '9') {
        unsigned d = buf[j] - '0';
        if (*n_significant || d) {
            if (*n_significant >= 19) {
                *n_significant = 20;
                break;
            }
            *man = *man * 10 + d;
            ++*n_significant;
        }
        j++;
    }
    Py_ssize_t n = j - *i;
    *i = j;
    return n;
}

/* The careful parser of one cell buf[start:end]: 1 with *out float()'s value when the cell is
 * a plain decimal (ASCII whitespace around, an optional sign, digits with an optional point,
 * an optional exponent, at most 19 significant digits) decided here by Clinger's exact fast
 * path or by Eisel-Lemire (as Go's strconv/eisel_lemire.go, which gives up instead of
 * guessing); 0 for every other cell (underscores, inf, nan, too many digits, a subnormal or
 * overflowing result, a halfway case, anything invalid): float() decides. */
static int parse_decimal(const unsigned char *buf, Py_ssize_t start, Py_ssize_t end, double *out)
{
    Py_ssize_t i = start;
    while (i < end && is_space(buf[i]))
        i++;
    while (end > i && is_space(buf[end - 1]))
        end--;
    if (i == end)
        return 0;
    int neg = 0;
    if (buf[i] == '-') {
        neg = 1;
        i++;
    }
    else if (buf[i] == '+') {
        i++;
    }
    uint64_t man = 0;
    int n_significant = 0;
    Py_ssize_t n_digits = read_significant(buf, &i, end, &man, &n_significant);
    int64_t exp10 = 0;
    if (i < end && buf[i] == '.') {
        i++;
        Py_ssize_t n_fraction = read_significant(buf, &i, end, &man, &n_significant);
        exp10 -= n_fraction;
        n_digits += n_fraction;
    }
    if (n_significant > 19)
        return 0;
    if (n_digits == 0)
        return 0;
    if (i < end && (buf[i] == 'e' || buf[i] == 'E')) {
        i++;
        int exp_neg = 0;
        if (i < end && (buf[i] == '-' || buf[i] == '+')) {
            exp_neg = buf[i] == '-';
            i++;
        }
        if (i == end || !(buf[i] >= '0' && buf[i] <= '9'))
            return 0;
        int64_t e = 0;
        while (i < end && buf[i] >= '0' && buf[i] <= '9') {
            if (e < 100000)
                e = e * 10 + (buf[i] - '0');
            i++;
        }
        exp10 += exp_neg ? -e : e;
    }
    if (i != end)
        return 0;
    int ok;
    double value = signed_decimal(man, exp10, neg, &ok);
    if (!ok)
        return 0;
    *out = value;
    return 1;
}

/* A cell's value into *x, or (ok false) the cell onto the list left to Python's float():
   (start, end, row, column). 0 when that list is full. */
static inline int store_cell(double *x, int ok, double value, int64_t *slow, Py_ssize_t *n_slow,
                             Py_ssize_t slow_cap, Py_ssize_t start, Py_ssize_t end,
                             Py_ssize_t row, Py_ssize_t col)
{
    if (ok) {
        *x = value;
        return 1;
    }
    if (*n_slow == slow_cap)
        return 0;
    int64_t *s = slow + 4 * *n_slow;
    s[0] = start;
    s[1] = end;
    s[2] = row;
    s[3] = col;
    ++*n_slow;
    return 1;
}

/* Parse the lines of ncol cells, each ending with a newline, into X (the label column apart),
 * at most cap of them (X holds cap rows); *rows_out: how many there were. buf ends with a
 * newline: every inner loop stops at it without a bounds check. Status 0: done; 1: a quote;
 * 2: more cells for float() than slow holds; 3: a line of another column count, or more than
 * cap lines.
 * The label cells are copied into labels[:n_labels], joined by newlines; slow[k] is the
 * (start, end, row, column) of a cell for float() to decide. One pass: a cell of the plain
 * form [-+]digits[.digits][(e|E)[-+]digits] with at most 19 digits is converted as it is read;
 * any other cell goes to parse_decimal. */
static int scan_csv(const unsigned char *buf, Py_ssize_t size, Py_ssize_t n, Py_ssize_t ncol,
                    Py_ssize_t label_col, double *X, unsigned char *labels, int64_t *slow,
                    Py_ssize_t slow_cap, Py_ssize_t *rows_out, Py_ssize_t *n_labels_out,
                    Py_ssize_t *n_slow_out)
{
    Py_ssize_t row = 0, col = 0, n_slow = 0, n_labels = 0, i = 0;
    Py_ssize_t d = ncol - 1;
    int status = 0;
    while (i < size) {
        Py_ssize_t start = i;
        if (col == label_col) {
            if (row)
                labels[n_labels++] = '\n';
            unsigned char c = buf[i];
            while (c != ',' && c != '\n') {
                if (c == '"') {
                    status = 1;
                    goto done;
                }
                labels[n_labels++] = c;
                c = buf[++i];
            }
        }
        else {
            Py_ssize_t j = i;
            unsigned char c = buf[j];
            const int neg = c == '-';
            j += neg | (c == '+'); /* no branch: signs are random, a branch would miss half */
            uint64_t man = 0;
            Py_ssize_t d0 = j;
            j = read_digits(buf, j, size, &man);
            Py_ssize_t n_digits = j - d0;
            int64_t exp10 = 0;
            if (buf[j] == '.') {
                Py_ssize_t f0 = ++j;
                j = read_digits(buf, j, size, &man);
                exp10 = f0 - j;
                n_digits += j - f0;
            }
            int plain = n_digits > 0 && n_digits <= 19;
            c = buf[j];
            if (plain && (c == 'e' || c == 'E')) {
                Py_ssize_t after = read_exponent(buf, j + 1, &exp10);
                if (after < 0)
                    plain = 0; /* no exponent digit: the careful parser decides */
                else
                    j = after;
                c = buf[j];
            }
            int ok = 0;
            double value = 0.0;
            if (plain && (c == ',' || c == '\n')) {
                value = signed_decimal(man, exp10, neg, &ok);
                i = j;
            }
            else {
                while (c != ',' && c != '\n') {
                    if (c == '"') {
                        status = 1;
                        goto done;
                    }
                    c = buf[++j];
                }
                i = j;
                ok = parse_decimal(buf, start, i, &value);
            }
            if (col >= ncol || row >= n) {
                status = 3;
                goto done;
            }
            Py_ssize_t k = col < label_col ? col : col - 1;
            if (!store_cell(X + row * d + k, ok, value, slow, &n_slow, slow_cap, start, i, row, k)) {
                status = 2;
                goto done;
            }
        }
        if (col >= ncol || row >= n) {
            status = 3;
            goto done;
        }
        if (buf[i] == '\n') {
            if (col != ncol - 1) {
                status = 3;
                goto done;
            }
            row++;
            col = 0;
        }
        else {
            col++;
        }
        i++;
    }
done:
    *rows_out = row;
    *n_labels_out = n_labels;
    *n_slow_out = n_slow;
    return status;
}

/* -- JSON lines ----------------------------------------------------------------------------
 *
 * scan_jsonl reads lines that are flat JSON objects with exactly the given keys in the given
 * order (no escapes in the keys), every value but the label's a JSON number or a boolean.
 * Numbers follow JSON's grammar strictly (json.loads would reject anything else). A JSON
 * integer is float(int(text)) in Python: as float(text), but for -0, which is +0.0. Status 3
 * for any line of another form: the caller parses the block line by line instead.
 */

static inline Py_ssize_t skip_ws(const unsigned char *buf, Py_ssize_t i)
{
    if (buf[i] > ' ') /* the usual case: no whitespace, one comparison */
        return i;
    if (buf[i] == ' ' && buf[i + 1] > ' ') /* one space (buf ends with a newline) */
        return i + 1;
    while (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r')
        i++;
    return i;
}

typedef struct {
    const char *text;
    Py_ssize_t len;
} Key;

static int scan_jsonl(const unsigned char *buf, Py_ssize_t size, Py_ssize_t n, const Key *keys,
                      Py_ssize_t nkeys, Py_ssize_t label_index, double *X, unsigned char *labels,
                      int64_t *slow, Py_ssize_t slow_cap, Py_ssize_t *n_labels_out,
                      Py_ssize_t *n_slow_out)
{
    Py_ssize_t row = 0, n_slow = 0, n_labels = 0, i = 0;
    Py_ssize_t d = nkeys - 1;
    int status = 0;
    while (i < size) {
        if (row >= n) {
            status = 3;
            goto done;
        }
        i = skip_ws(buf, i);
        if (buf[i] != '{') {
            status = 3;
            goto done;
        }
        i++;
        for (Py_ssize_t k = 0; k < nkeys; k++) {
            i = skip_ws(buf, i);
            if (buf[i] != '"' || i + 1 + keys[k].len >= size ||
                memcmp(buf + i + 1, keys[k].text, keys[k].len) != 0 ||
                buf[i + 1 + keys[k].len] != '"') {
                status = 3;
                goto done;
            }
            i = skip_ws(buf, i + 2 + keys[k].len);
            if (buf[i] != ':') {
                status = 3;
                goto done;
            }
            i = skip_ws(buf, i + 1);
            Py_ssize_t start = i;
            if (k == label_index) {
                if (row)
                    labels[n_labels++] = '\n';
                if (buf[i] == '"') {
                    i++;
                    while (buf[i] != '"') {
                        if (buf[i] == '\n') {
                            status = 3;
                            goto done;
                        }
                        i += buf[i] == '\\' && buf[i + 1] != '\n' ? 2 : 1;
                    }
                    i++;
                }
                else {
                    while (buf[i] != ',' && buf[i] != '}' && buf[i] != ' ' && buf[i] != '\t' &&
                           buf[i] != '\r' && buf[i] != '\n')
                        i++;
                }
                memcpy(labels + n_labels, buf + start, i - start);
                n_labels += i - start;
            }
            else {
                Py_ssize_t col = k < label_index ? k : k - 1;
                double value = 0.0;
                int ok = 1;
                unsigned char c = buf[i];
                if (c == 't' && i + 4 <= size && memcmp(buf + i, "true", 4) == 0) {
                    value = 1.0;
                    i += 4;
                }
                else if (c == 'f' && i + 5 <= size && memcmp(buf + i, "false", 5) == 0) {
                    i += 5;
                }
                else {
                    int neg = c == '-';
                    if (neg)
                        i++;
                    uint64_t man = 0;
                    Py_ssize_t d0 = i;
                    if (buf[i] == '0') {
                        i++;
                    }
                    else if (buf[i] >= '1' && buf[i] <= '9') {
                        i = read_digits(buf, i, size, &man);
                    }
                    else {
                        status = 3; /* not a number: a string, null, an object... */
                        goto done;
                    }
                    Py_ssize_t n_digits = i - d0;
                    int64_t exp10 = 0;
                    int integer = 1;
                    if (buf[i] == '.') {
                        integer = 0;
                        Py_ssize_t f0 = ++i;
                        i = read_digits(buf, i, size, &man);
                        if (i == f0) {
                            status = 3;
                            goto done;
                        }
                        exp10 = f0 - i;
                        n_digits += i - f0;
                    }
                    if (buf[i] == 'e' || buf[i] == 'E') {
                        integer = 0;
                        i = read_exponent(buf, i + 1, &exp10);
                        if (i < 0) {
                            status = 3;
                            goto done;
                        }
                    }
                    if (n_digits > 19)
                        ok = 0;
                    else if (integer && man == 0)
                        value = 0.0; /* float(int("-0")) is +0.0 */
                    else
                        value = signed_decimal(man, exp10, neg, &ok);
                }
                if (!store_cell(X + row * d + col, ok, value, slow, &n_slow, slow_cap, start, i,
                                row, col)) {
                    status = 2;
                    goto done;
                }
            }
            i = skip_ws(buf, i);
            if (buf[i] != (k == nkeys - 1 ? '}' : ',')) {
                status = 3;
                goto done;
            }
            i++;
        }
        i = skip_ws(buf, i);
        if (buf[i] != '\n') {
            status = 3;
            goto done;
        }
        i++;
        row++;
    }
    if (row != n)
        status = 3;
done:
    *n_labels_out = n_labels;
    *n_slow_out = n_slow;
    return status;
}

static int get_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t min_bytes,
                      const char *what)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : PyBUF_SIMPLE)) < 0)
        return -1;
    if (!PyBuffer_IsContiguous(view, 'C') || view->len < min_bytes) {
        PyErr_Format(PyExc_ValueError, "%s: a contiguous buffer of at least %zd bytes is needed",
                     what, min_bytes);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject *obj;
    int writable;
    Py_ssize_t min_bytes;
    const char *name;
} BufferSpec;

/* get_buffer for each spec into views[]; on failure the ones held are released, -1. */
static int get_buffers(const BufferSpec *specs, Py_buffer *views, int count)
{
    for (int k = 0; k < count; k++) {
        if (get_buffer(specs[k].obj, &views[k], specs[k].writable, specs[k].min_bytes,
                       specs[k].name) < 0) {
            while (k-- > 0)
                PyBuffer_Release(&views[k]);
            return -1;
        }
    }
    return 0;
}

static void release_buffers(Py_buffer *views, int count)
{
    for (int k = 0; k < count; k++)
        PyBuffer_Release(&views[k]);
}

/* A scanner's buffers into v: the text (ending with a newline), X (x_bytes at least), the
   label buffer (as long as the text) and the slow-cell list; -1 with all released on failure. */
static int get_scan_buffers(PyObject *o_buf, PyObject *o_X, Py_ssize_t x_bytes,
                            PyObject *o_labels, PyObject *o_slow, Py_buffer *v)
{
    if (get_buffer(o_buf, &v[0], 0, 1, "buf") < 0)
        return -1;
    if (((const unsigned char *)v[0].buf)[v[0].len - 1] != '\n') {
        PyBuffer_Release(&v[0]);
        PyErr_SetString(PyExc_ValueError, "buf must end with a newline");
        return -1;
    }
    const BufferSpec specs[3] = {
        {o_X, 1, x_bytes, "X"},
        {o_labels, 1, v[0].len, "labels"},
        {o_slow, 1, 0, "slow"},
    };
    if (get_buffers(specs, v + 1, 3) < 0) {
        PyBuffer_Release(&v[0]);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(scan_csv_doc,
"scan_csv(buf, cap, ncol, label_col, X, labels, slow) -> (status, rows, n_labels, n_slow)\n\n"
"The CSV block scanner: ``buf`` (bytes ending with a newline) holds ``rows`` lines of ``ncol``\n"
"cells, at most ``cap``; X is float64 (cap, ncol - 1), labels uint8 (len(buf)), slow int64\n"
"(k, 4). The scan runs without the GIL.");

static PyObject *py_scan_csv(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_X, *o_labels, *o_slow;
    Py_ssize_t n, ncol, label_col;
    if (!PyArg_ParseTuple(args, "OnnnOOO", &o_buf, &n, &ncol, &label_col, &o_X, &o_labels,
                          &o_slow))
        return NULL;
    if (!tables_ready) {
        PyErr_SetString(PyExc_RuntimeError, "call set_tables first");
        return NULL;
    }
    if (n < 0 || ncol < 1 || label_col < 0 || label_col >= ncol) {
        PyErr_SetString(PyExc_ValueError, "bad n, ncol or label_col");
        return NULL;
    }
    Py_buffer v[4];
    if (get_scan_buffers(o_buf, o_X, n * (ncol - 1) * (Py_ssize_t)sizeof(double), o_labels,
                         o_slow, v) < 0)
        return NULL;
    Py_ssize_t rows = 0, n_labels = 0, n_slow = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_csv(v[0].buf, v[0].len, n, ncol, label_col, v[1].buf, v[2].buf, v[3].buf,
                      v[3].len / (4 * (Py_ssize_t)sizeof(int64_t)), &rows, &n_labels, &n_slow);
    Py_END_ALLOW_THREADS
    release_buffers(v, 4);
    return Py_BuildValue("innn", status, rows, n_labels, n_slow);
}

PyDoc_STRVAR(scan_jsonl_doc,
"scan_jsonl(buf, n, keys, label_index, X, labels, slow) -> (status, n_labels, n_slow)\n\n"
"``buf`` (bytes ending with a newline) holds ``n`` flat JSON objects, one a line, with the\n"
"keys ``keys`` (a list of UTF-8 bytes, no escapes) in that order; ``label_index`` is the\n"
"label's place in ``keys``. X is float64 (n, len(keys) - 1), labels uint8 (len(buf)): the\n"
"raw label values joined by newlines; slow int64 (k, 4): (start, end, row, column) of the\n"
"numbers left to Python. Status 0 done, 2 slow is full, 3 a line of another form.");

static PyObject *py_scan_jsonl(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_keys, *o_X, *o_labels, *o_slow;
    Py_ssize_t n, label_index;
    if (!PyArg_ParseTuple(args, "OnO!nOOO", &o_buf, &n, &PyList_Type, &o_keys, &label_index,
                          &o_X, &o_labels, &o_slow))
        return NULL;
    if (!tables_ready) {
        PyErr_SetString(PyExc_RuntimeError, "call set_tables first");
        return NULL;
    }
    Py_ssize_t nkeys = PyList_GET_SIZE(o_keys);
    if (n < 0 || nkeys < 1 || label_index < 0 || label_index >= nkeys) {
        PyErr_SetString(PyExc_ValueError, "bad n, keys or label_index");
        return NULL;
    }
    Key *keys = PyMem_Malloc(nkeys * sizeof(Key));
    if (keys == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < nkeys; k++) {
        PyObject *key = PyList_GET_ITEM(o_keys, k);
        if (!PyBytes_Check(key)) {
            PyMem_Free(keys);
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            return NULL;
        }
        keys[k].text = PyBytes_AS_STRING(key);
        keys[k].len = PyBytes_GET_SIZE(key);
    }
    Py_buffer v[4];
    if (get_scan_buffers(o_buf, o_X, n * (nkeys - 1) * (Py_ssize_t)sizeof(double), o_labels,
                         o_slow, v) < 0) {
        PyMem_Free(keys);
        return NULL;
    }
    Py_ssize_t n_labels = 0, n_slow = 0;
    int status;
    /* keys point into bytes objects the caller's list holds: no Python call runs meanwhile */
    Py_BEGIN_ALLOW_THREADS
    status = scan_jsonl(v[0].buf, v[0].len, n, keys, nkeys, label_index, v[1].buf, v[2].buf,
                        v[3].buf, v[3].len / (4 * (Py_ssize_t)sizeof(int64_t)), &n_labels,
                        &n_slow);
    Py_END_ALLOW_THREADS
    release_buffers(v, 4);
    PyMem_Free(keys);
    return Py_BuildValue("inn", status, n_labels, n_slow);
}

PyDoc_STRVAR(count_lines_doc,
"count_lines(buf, start, end) -> int\n\n"
"How many newlines buf[start:end] holds (memchr's speed; bytes.count goes a byte at a time).");

static PyObject *py_count_lines(PyObject *self, PyObject *args)
{
    PyObject *o_buf;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "Onn", &o_buf, &start, &end))
        return NULL;
    Py_buffer v;
    if (get_buffer(o_buf, &v, 0, 0, "buf") < 0)
        return NULL;
    if (start < 0 || end > v.len || start > end) {
        PyBuffer_Release(&v);
        PyErr_SetString(PyExc_ValueError, "bad start or end");
        return NULL;
    }
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    const char *p = (const char *)v.buf + start, *stop = (const char *)v.buf + end;
    while (p < stop && (p = memchr(p, '\n', (size_t)(stop - p))) != NULL) {
        count++;
        p++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(count);
}

/* -- Label cells as ids -----------------------------------------------------------------------
 *
 * A block's label cells, joined by newlines, as one small id per row and the distinct cells in
 * the order first seen: the engine then encodes each distinct cell once and the rows by array
 * indexing, with no bytes object made per row.
 */

#define INTERN_MAX 64     /* distinct cells at most */
#define INTERN_LEN 64     /* bytes in a cell at most */

/* ids[r] for each of the rows lines of buf[:size] (joined by newlines, none at the end);
   starts/lens: the distinct cells. Returns how many there are, -1 when there are more than
   max_distinct, a cell is longer than INTERN_LEN or the line count is not rows. */
static Py_ssize_t intern_lines(const unsigned char *buf, Py_ssize_t size, int32_t *ids,
                               Py_ssize_t rows, Py_ssize_t max_distinct, Py_ssize_t *starts,
                               Py_ssize_t *lens)
{
    Py_ssize_t n_distinct = 0, last = -1, row = 0, i = 0;
    for (;;) {
        Py_ssize_t start = i;
        while (i < size && buf[i] != '\n')
            i++;
        Py_ssize_t len = i - start;
        if (row >= rows || len > INTERN_LEN)
            return -1;
        Py_ssize_t id = -1;
        if (last >= 0 && lens[last] == len && memcmp(buf + starts[last], buf + start, len) == 0)
            id = last;
        else {
            for (Py_ssize_t k = 0; k < n_distinct; k++) {
                if (lens[k] == len && memcmp(buf + starts[k], buf + start, len) == 0) {
                    id = k;
                    break;
                }
            }
            if (id < 0) {
                if (n_distinct >= max_distinct)
                    return -1;
                starts[n_distinct] = start;
                lens[n_distinct] = len;
                id = n_distinct++;
            }
            last = id;
        }
        ids[row++] = (int32_t)id;
        if (i >= size)
            break;
        i++; /* the newline */
    }
    return row == rows ? n_distinct : -1;
}

PyDoc_STRVAR(intern_lines_doc,
"intern_lines(buf, ids, max_distinct) -> list of bytes | None\n\n"
"``buf`` holds len(ids) lines joined by newlines (none at the end); ids (int32) gets each\n"
"line's index in the returned list of the distinct lines, in the order first seen. None when\n"
"there are more than ``max_distinct`` (at most 64) distinct lines, a line is longer than 64\n"
"bytes or the line count is not len(ids).");

static PyObject *py_intern_lines(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_ids;
    Py_ssize_t max_distinct;
    if (!PyArg_ParseTuple(args, "OOn", &o_buf, &o_ids, &max_distinct))
        return NULL;
    if (max_distinct < 1 || max_distinct > INTERN_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_distinct must be 1..64");
        return NULL;
    }
    Py_buffer v[2];
    if (get_buffer(o_buf, &v[0], 0, 0, "buf") < 0)
        return NULL;
    if (get_buffer(o_ids, &v[1], 1, 0, "ids") < 0) {
        PyBuffer_Release(&v[0]);
        return NULL;
    }
    Py_ssize_t rows = v[1].len / (Py_ssize_t)sizeof(int32_t);
    Py_ssize_t starts[INTERN_MAX], lens[INTERN_MAX], n_distinct = -1;
    if (rows > 0) {
        Py_BEGIN_ALLOW_THREADS
        n_distinct = intern_lines(v[0].buf, v[0].len, v[1].buf, rows, max_distinct, starts, lens);
        Py_END_ALLOW_THREADS
    }
    PyObject *out = NULL;
    if (n_distinct < 0) {
        out = Py_None;
        Py_INCREF(out);
    }
    else if ((out = PyList_New(n_distinct)) != NULL) {
        for (Py_ssize_t k = 0; k < n_distinct; k++) {
            PyObject *cell = PyBytes_FromStringAndSize((const char *)v[0].buf + starts[k], lens[k]);
            if (cell == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, k, cell);
        }
    }
    release_buffers(v, 2);
    return out;
}

PyDoc_STRVAR(parse_decimal_doc,
"parse_decimal(text) -> (ok, value)\n\n"
"The careful decimal parser on a whole bytes object (for tests).");

static PyObject *py_parse_decimal(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (!tables_ready) {
        PyErr_SetString(PyExc_RuntimeError, "call set_tables first");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    double value = 0.0;
    int ok = parse_decimal(view.buf, 0, view.len, &value);
    PyBuffer_Release(&view);
    return Py_BuildValue("Od", ok ? Py_True : Py_False, ok ? value : 0.0);
}

PyDoc_STRVAR(set_tables_doc,
"set_tables(lo, hi)\n\n"
"The 128-bit powers of ten of Eisel-Lemire (uint64 arrays, from native/__init__.py).");

static PyObject *py_set_tables(PyObject *self, PyObject *args)
{
    PyObject *o_lo, *o_hi;
    if (!PyArg_ParseTuple(args, "OO", &o_lo, &o_hi))
        return NULL;
    Py_buffer lo, hi;
    Py_ssize_t size = N_POW10 * (Py_ssize_t)sizeof(uint64_t);
    if (get_buffer(o_lo, &lo, 0, size, "lo") < 0)
        return NULL;
    if (get_buffer(o_hi, &hi, 0, size, "hi") < 0) {
        PyBuffer_Release(&lo);
        return NULL;
    }
    memcpy(pow10_lo, lo.buf, size);
    memcpy(pow10_hi, hi.buf, size);
    PyBuffer_Release(&lo);
    PyBuffer_Release(&hi);
    tables_ready = 1;
    Py_RETURN_NONE;
}

/* -- buffers for the block path without NumPy ------------------------------------------------ */

PyDoc_STRVAR(set_malloc_thresholds_doc,
"set_malloc_thresholds(mmap_threshold, trim_threshold) -> bool\n\n"
"glibc's mallopt(M_MMAP_THRESHOLD, mmap_threshold), then mallopt(M_TRIM_THRESHOLD,\n"
"trim_threshold) when the first did: True when both did, False where the C library is not\n"
"glibc (stream_perceptron/allocator.py; what ctypes did there, without its 3.5 ms of start).");

static PyObject *py_set_malloc_thresholds(PyObject *self, PyObject *args)
{
    int mmap_threshold, trim_threshold;
    if (!PyArg_ParseTuple(args, "ii", &mmap_threshold, &trim_threshold))
        return NULL;
#if defined(__GLIBC__)
    int done = mallopt(M_MMAP_THRESHOLD, mmap_threshold) != 0 &&
               mallopt(M_TRIM_THRESHOLD, trim_threshold) != 0;
    return PyBool_FromLong(done);
#else
    Py_RETURN_FALSE;
#endif
}

PyDoc_STRVAR(empty_doc,
"empty(nbytes) -> bytearray\n\n"
"A bytearray of ``nbytes`` bytes, not initialised (as numpy.empty): the scanners' matrices and\n"
"label buffers, each written whole before it is read.");

static PyObject *py_empty(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "nbytes must be >= 0");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, n);
}

PyDoc_STRVAR(take_doc,
"take(table, ids) -> bytearray\n\n"
"``table[ids[i]]`` for each int32 ``ids[i]`` (``0 <= ids[i] < len(table)``, else ValueError):\n"
"a block's signs from its rows' label cell ids, each distinct cell encoded once.");

static PyObject *py_take(PyObject *self, PyObject *args)
{
    PyObject *o_table, *o_ids;
    if (!PyArg_ParseTuple(args, "OO", &o_table, &o_ids))
        return NULL;
    const BufferSpec specs[2] = {{o_table, 0, 0, "table"}, {o_ids, 0, 0, "ids"}};
    Py_buffer v[2];
    if (get_buffers(specs, v, 2) < 0)
        return NULL;
    const unsigned char *t = v[0].buf;
    const int32_t *id = v[1].buf;
    Py_ssize_t n = v[1].len / (Py_ssize_t)sizeof(int32_t);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        if (id[i] < 0 || id[i] >= v[0].len) {
            Py_CLEAR(out);
            PyErr_Format(PyExc_ValueError, "ids[%zd] = %d is outside the table", i, (int)id[i]);
        } else {
            PyByteArray_AS_STRING(out)[i] = (char)t[id[i]];
        }
    }
    release_buffers(v, 2);
    return out;
}

PyDoc_STRVAR(mistakes_doc,
"mistakes(predicted, signs) -> (list[bool], int)\n\n"
"For int8 predictions and signs of the same length: whether each labelled row (sign not 0)\n"
"was predicted wrong, in order, and how many rows were unlabelled.");

static PyObject *py_mistakes(PyObject *self, PyObject *args)
{
    PyObject *o_pred, *o_signs;
    if (!PyArg_ParseTuple(args, "OO", &o_pred, &o_signs))
        return NULL;
    const BufferSpec specs[2] = {{o_pred, 0, 0, "predicted"}, {o_signs, 0, 0, "signs"}};
    Py_buffer v[2];
    if (get_buffers(specs, v, 2) < 0)
        return NULL;
    const signed char *p = v[0].buf, *y = v[1].buf;
    Py_ssize_t n = v[0].len, unlabelled = 0;
    PyObject *list = NULL;
    if (v[1].len != n) {
        PyErr_SetString(PyExc_ValueError, "predicted and signs differ in length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        unlabelled += y[i] == 0;
    list = PyList_New(n - unlabelled);
    for (Py_ssize_t i = 0, k = 0; list != NULL && i < n; i++) {
        if (y[i] != 0) {
            PyObject *wrong = p[i] != y[i] ? Py_True : Py_False;
            Py_INCREF(wrong);
            PyList_SET_ITEM(list, k++, wrong);
        }
    }
done:
    release_buffers(v, 2);
    return list == NULL ? NULL : Py_BuildValue("Nn", list, unlabelled);
}

/* -- the kernels' common definitions ------------------------------------------------------------
 *
 * The learners' rules are _rules.h's (binary_rule_row: Perceptron._learn and predict_one;
 * multi_rule_row: MulticlassPerceptron's, both the dict API's too; pa_rule_row,
 * pa_multi_rule_row: the passive-aggressive learners'); their blocks (below, after the sparse
 * rows' checks) only say where a block's rows and cells are. The cells are the block's
 * arrays, one slot a feature of the block (w, u float64, present the bits RULE_W, RULE_U of
 * the model's dicts), read and written by the glue (learners/_binary_kernel.py,
 * _multiclass_kernel.py, _pa_kernel.py). A dense row is the row whose slots are 0..d-1, float64 or
 * float32 (each value the double it is exactly: the float64 copy of X took longer than the
 * learning); a sparse row is a CSR row.
 */
#include "_rules.h"

/* Each kernel compiled twice on x86-64 with GCC or clang, for CPUs with AVX2 and for the
 * others, the loader picking one (ifunc). The same IEEE operations either way (no FMA:
 * -ffp-contract=off, and AVX2 does not bring it), so the same bits. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__)
#define KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KERNEL_CLONES
#endif

/* -- the sparse block ---------------------------------------------------------------------
 *
 * A block of JSON lines of any shape the record path reads as numbers (JsonLinesParser.parse,
 * the reference) as CSR rows: indptr (int64, n + 1), slots (int32, a feature a value) and
 * values (float64), the slots local to the block: slot k is the k-th distinct feature name
 * the block brings, the names returned as a list of str. Per line: a flat object, any key
 * set and order, or the nested {"x": {...}, "y": label} form; numbers as JsonLinesParser makes
 * them (integers as float(int), the rest as float()), booleans 1.0/0.0, null missing, a
 * string value v of key k the feature "k=v" at 1.0. The label's raw JSON text goes into
 * labels (joined by newlines; "null" when absent), as scan_jsonl gives it. Status 3 for any
 * line of another form (an escape or control character in a key or string, a duplicate key, a
 * value that is an array or another object, NaN, an empty line, ...): the caller parses the
 * block line by line, where each such line gets its reason. A name given twice in a row (the
 * same key and value, or "a=b" as a key and as a string) is status 3 too: the record path
 * decides. Numbers left to Python as in scan_jsonl (slow: start, end, item, 0).
 */

typedef struct {
    uint64_t hash;
    uint64_t kword;                        /* a key of 7 bytes or fewer: them (tail_word) */
    Py_ssize_t kstart, klen, vstart, vlen; /* vlen -1: a key's own entry */
    int32_t slot;                          /* the feature's local slot; -1: none yet */
    Py_ssize_t stamp;                      /* the last row (+1) that had it */
} SparseEntry;

typedef struct {
    const unsigned char *buf;
    Py_ssize_t size;        /* buf's; an offset at or past it is arena's (offset - size) */
    SparseEntry *entries;
    size_t cap, count;
    int32_t n_slots;
    Py_ssize_t *slot_spans; /* slot k's name: kstart, klen, vstart, vlen at 4k */
    size_t slot_cap;
    unsigned char *arena;   /* the decoded text of strings that hold escapes */
    Py_ssize_t arena_len, arena_cap;
} SparseTable;

/* The text at offset off: in the block, or decoded in the arena. */
static inline const unsigned char *sparse_text(const SparseTable *t, Py_ssize_t off)
{
    return off < t->size ? t->buf + off : t->arena + (off - t->size);
}

static inline int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static inline long hex4(const unsigned char *p)
{
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int d = hex_digit(p[k]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Whether byte c may stand in a JSON string as itself: not a quote, a backslash or a control
   character (one table look-up a byte instead of three comparisons). */
static const unsigned char string_byte[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    R16(0), R16(0),                                         /* 0x00-0x1F: control */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,         /* 0x20-0x2F: '"' */
    R16(1),                                                 /* 0x30-0x3F */
    R16(1),                                                 /* 0x40-0x4F */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,         /* 0x50-0x5F: '\\' */
    R16(1), R16(1),                                         /* 0x60-0x7F */
    R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), /* 0x80-0xFF */
#undef R16
};

static Py_ssize_t sparse_string_escaped(SparseTable *t, Py_ssize_t start, Py_ssize_t *off,
                                        Py_ssize_t *len);

/* A JSON string at buf[i] == '"': the index after its closing quote, its text's offset and
   length into *off, *len (in the block when it holds no escape, else decoded into the arena as
   UTF-8, as json.loads decodes it); -1 when json.loads would refuse it (a control character, a
   bad escape) or it is not text (a lone surrogate escape: the record path says invalid_utf8),
   -2 no memory. The block ends with a newline, so every loop stops. */
static inline __attribute__((always_inline)) Py_ssize_t
sparse_string(SparseTable *t, Py_ssize_t i, Py_ssize_t *off, Py_ssize_t *len)
{
    const unsigned char *buf = t->buf;
    Py_ssize_t start = ++i;
    if (i + 8 <= t->size) {
        /* a short string (a feature name's usual length) ends within eight bytes: the first
           quote, backslash or control character among them found at once (each mask's lowest
           flag is exact; a borrow only flags bytes above it), not by a loop a byte */
        uint64_t w;
        memcpy(&w, buf + i, 8);
        const uint64_t ones = 0x0101010101010101ull;
        const uint64_t q = w ^ (0x22 * ones), b = w ^ (0x5C * ones);
        const uint64_t special =
            (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - 0x20 * ones) & ~w)) & (0x80 * ones);
        if (special != 0) {
            const Py_ssize_t end = i + (__builtin_ctzll(special) >> 3);
            if (buf[end] == '"') {
                *off = start;
                *len = end - start;
                return end + 1;
            }
        }
    }
    while (string_byte[buf[i]])
        i++;
    if (buf[i] == '"') {
        *off = start;
        *len = i - start;
        return i + 1;
    }
    if (buf[i] < 0x20)
        return -1;
    return sparse_string_escaped(t, start, off, len); /* a backslash */
}

/* sparse_string's string from its start, holding an escape: decoded whole into the arena. */
static __attribute__((noinline)) Py_ssize_t
sparse_string_escaped(SparseTable *t, Py_ssize_t start, Py_ssize_t *off, Py_ssize_t *len)
{
    const unsigned char *buf = t->buf;
    Py_ssize_t i;
    Py_ssize_t need = t->arena_len + (t->size - start); /* decoded text is never longer */
    if (need > t->arena_cap) {
        Py_ssize_t cap = need > 2 * t->arena_cap ? need : 2 * t->arena_cap;
        unsigned char *grown = realloc(t->arena, (size_t)cap);
        if (grown == NULL)
            return -2;
        t->arena = grown;
        t->arena_cap = cap;
    }
    unsigned char *o = t->arena + t->arena_len;
    Py_ssize_t n = 0;
    i = start;
    for (;;) {
        unsigned char c = buf[i];
        if (c == '"')
            break;
        if (c < 0x20)
            return -1;
        if (c != '\\') {
            o[n++] = c;
            i++;
            continue;
        }
        unsigned char e = buf[i + 1];
        i += 2;
        switch (e) {
        case '"': o[n++] = '"'; continue;
        case '\\': o[n++] = '\\'; continue;
        case '/': o[n++] = '/'; continue;
        case 'b': o[n++] = '\b'; continue;
        case 'f': o[n++] = '\f'; continue;
        case 'n': o[n++] = '\n'; continue;
        case 'r': o[n++] = '\r'; continue;
        case 't': o[n++] = '\t'; continue;
        case 'u': break;
        default: return -1;
        }
        if (i + 4 > t->size)
            return -1;
        long cp = hex4(buf + i);
        if (cp < 0)
            return -1;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a pair, or a lone high surrogate */
            if (!(buf[i] == '\\' && buf[i + 1] == 'u' && i + 6 <= t->size))
                return -1;
            long low = hex4(buf + i + 2);
            if (low < 0xDC00 || low > 0xDFFF)
                return -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            i += 6;
        }
        else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return -1;
        }
        /* UTF-8: at most 4 bytes from at least 6 escaped ones (12 for a pair) */
        if (cp < 0x80) {
            o[n++] = (unsigned char)cp;
        }
        else if (cp < 0x800) {
            o[n++] = (unsigned char)(0xC0 | (cp >> 6));
            o[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else if (cp < 0x10000) {
            o[n++] = (unsigned char)(0xE0 | (cp >> 12));
            o[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
        else {
            o[n++] = (unsigned char)(0xF0 | (cp >> 18));
            o[n++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            o[n++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[n++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    *off = t->size + t->arena_len;
    *len = n;
    t->arena_len += n;
    return i + 1;
}

/* The n < 8 bytes at p as a little-endian word, zero-padded: one load when `room` (8 bytes
   at p are readable), else a byte at a time. */
static inline uint64_t tail_word(const unsigned char *p, Py_ssize_t n, int room)
{
    uint64_t w = 0;
    if (room) {
        memcpy(&w, p, 8);
        return n ? w & (~0ull >> (64 - 8 * n)) : 0;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        w |= (uint64_t)p[k] << (8 * k);
    return w;
}

/* A hash of the n bytes at p, continuing from h: eight bytes a step (feature names are
   short: one or two steps), the last (n % 8) bytes as one word (tail_word; `room`: 8 bytes
   readable from there). */
static inline uint64_t text_hash(uint64_t h, const unsigned char *p, Py_ssize_t n, int room)
{
    h ^= (uint64_t)n * 0xFF51AFD7ED558CCDull;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = tail_word(p, n, room);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

/* Whether the n bytes at a and b are the same (names are short: no call for them). */
static inline int same_text(const unsigned char *a, const unsigned char *b, Py_ssize_t n)
{
    if (n > 16)
        return memcmp(a, b, n) == 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (a[k] != b[k])
            return 0;
    return 1;
}

static int sparse_grow(SparseTable *t)
{
    size_t cap = t->cap ? 2 * t->cap : 1024;
    SparseEntry *e = calloc(cap, sizeof(SparseEntry));
    if (e == NULL)
        return -1;
    for (size_t k = 0; k < t->cap; k++) {
        SparseEntry *old = &t->entries[k];
        if (old->hash == 0)
            continue;
        size_t j = (size_t)old->hash & (cap - 1);
        while (e[j].hash != 0)
            j = (j + 1) & (cap - 1);
        e[j] = *old;
    }
    free(t->entries);
    t->entries = e;
    t->cap = cap;
    return 0;
}

/* The entry of key buf[ks:ks+kl] (vl < 0) or of the string feature key=value; NULL: no memory.
   An empty place in the table has hash 0 (a used entry's hash is odd). A pointer returned
   stays valid until the next call (which may grow the table). */
static inline __attribute__((always_inline)) SparseEntry *
sparse_entry(SparseTable *t, Py_ssize_t ks, Py_ssize_t kl, Py_ssize_t vs, Py_ssize_t vl)
{
    if (2 * (t->count + 1) > t->cap && sparse_grow(t) < 0)
        return NULL;
    const unsigned char *key = sparse_text(t, ks), *value = vl >= 0 ? sparse_text(t, vs) : NULL;
    /* 8 bytes readable at a name's last word: in the block, which goes on past it (a quote) */
    const Py_ssize_t kend = ks + (kl & ~(Py_ssize_t)7);
    uint64_t h = text_hash(1469598103934665603ull, key, kl, kend + 8 <= t->size);
    /* a short key: its bytes, hashed as they are compared (one word, no loop) */
    const uint64_t kword = kl < 8 ? tail_word(key, kl, kend + 8 <= t->size) : 0;
    if (vl >= 0) {
        const Py_ssize_t vend = vs + (vl & ~(Py_ssize_t)7);
        h = text_hash(h ^ 0x3D3D3D3D3D3D3D3Dull, value, vl, vend + 8 <= t->size);
    }
    h |= 1; /* never 0: 0 marks an empty slot */
    size_t j = (size_t)h & (t->cap - 1);
    for (;;) {
        SparseEntry *e = &t->entries[j];
        if (e->hash == 0) {
            e->hash = h;
            e->kword = kword;
            e->kstart = ks;
            e->klen = kl;
            e->vstart = vs;
            e->vlen = vl;
            e->slot = -1;
            e->stamp = 0;
            t->count++;
            return e;
        }
        if (e->hash == h && e->klen == kl && e->vlen == vl &&
            (kl < 8 ? e->kword == kword : same_text(sparse_text(t, e->kstart), key, kl)) &&
            (vl <= 0 || same_text(sparse_text(t, e->vstart), value, vl)))
            return e;
        j = (j + 1) & (t->cap - 1);
    }
}

/* A feature's slot (a new one for a name the block had not brought yet); -1: no memory. */
static int32_t sparse_slot(SparseTable *t, SparseEntry *e)
{
    if (e->slot >= 0)
        return e->slot;
    if ((size_t)t->n_slots == t->slot_cap) {
        size_t cap = t->slot_cap ? 2 * t->slot_cap : 256;
        Py_ssize_t *s = realloc(t->slot_spans, 4 * cap * sizeof(Py_ssize_t));
        if (s == NULL)
            return -1;
        t->slot_spans = s;
        t->slot_cap = cap;
    }
    Py_ssize_t *span = t->slot_spans + 4 * (size_t)t->n_slots;
    span[0] = e->kstart;
    span[1] = e->klen;
    span[2] = e->vstart;
    span[3] = e->vlen;
    e->slot = t->n_slots++;
    return e->slot;
}

/* The bytes of w (eight from a buffer, little-endian) that are not ASCII digits, as the high
   bit of each such byte. x's bytes are the digits' values (0-9) for digits; the low seven bits
   plus 0x76 reach 0x80 from 10 on and never carry into the next byte. */
static inline uint64_t non_digits(uint64_t w)
{
    const uint64_t x = w ^ 0x3030303030303030ull;
    return (((x & 0x7F7F7F7F7F7F7F7Full) + 0x7676767676767676ull) | x) & 0x8080808080808080ull;
}

/* The number the first n (1 to 8) bytes of w spell, all of them digits: moved to the top of
   the word (zeros below, as leading zeros), then digit_values. */
static inline uint64_t digits_of(uint64_t w, int n)
{
    const uint64_t keep = ~0ull >> (64 - 8 * n);
    return digit_values(((w & keep) - (0x3030303030303030ull & keep)) << (64 - 8 * n));
}

/* json_number's usual case without a loop a digit: up to 7 integer digits, then a fraction of
   1 to 7 digits or none, no exponent, found with two 8-byte loads (16 bytes readable at d0,
   the first digit). Returns the index after the number, with *man, *exp10 and *integer as
   json_number's own loops make them; 0 when the number is of another form (json_number then
   reads it the long way, and decides). The digits' ends were the data-dependent branches a
   sparse record's numbers missed (random lengths and signs). */
static inline Py_ssize_t short_decimal(const unsigned char *buf, Py_ssize_t d0, uint64_t *man,
                                       int64_t *exp10, int *integer)
{
    uint64_t w;
    memcpy(&w, buf + d0, 8);
    const uint64_t stop = non_digits(w);
    if (stop == 0)
        return 0; /* eight digits or more */
    const int k = __builtin_ctzll(stop) >> 3;
    if (k == 0 || (k > 1 && buf[d0] == '0'))
        return 0; /* no digit, or a leading zero: the long way refuses it */
    const unsigned char after = buf[d0 + k];
    if (after == 'e' || after == 'E')
        return 0;
    if (after != '.') {
        *man = digits_of(w, k);
        *exp10 = 0;
        *integer = 1;
        return d0 + k;
    }
    uint64_t f;
    memcpy(&f, buf + d0 + k + 1, 8);
    const uint64_t fstop = non_digits(f);
    if (fstop == 0)
        return 0;
    const int n = __builtin_ctzll(fstop) >> 3;
    const unsigned char end = buf[d0 + k + 1 + n];
    if (n == 0 || end == 'e' || end == 'E')
        return 0;
    static const uint64_t scale[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    *man = digits_of(w, k) * scale[n] + digits_of(f, n);
    *exp10 = -n;
    *integer = 0;
    return d0 + k + 1 + n;
}

/* A JSON number at buf[i] (strict grammar, as scan_jsonl): the index after it, -1 when it is
   not one; *value and *ok (0: left to Python) as scan_jsonl decides them. */
static inline __attribute__((always_inline)) Py_ssize_t
json_number(const unsigned char *buf, Py_ssize_t i, Py_ssize_t size,
                                     double *value, int *ok)
{
    int neg = buf[i] == '-';
    if (neg)
        i++;
    if (i + 16 <= size) {
        uint64_t m;
        int64_t e;
        int whole;
        Py_ssize_t next = short_decimal(buf, i, &m, &e, &whole);
        if (next > 0) { /* at most 14 digits: never past 19 */
            *ok = 1;
            *value = whole && m == 0 ? 0.0 : signed_decimal(m, e, neg, ok);
            return next;
        }
    }
    uint64_t man = 0;
    Py_ssize_t d0 = i;
    if (buf[i] == '0')
        i++;
    else if (buf[i] >= '1' && buf[i] <= '9')
        i = read_digits(buf, i, size, &man);
    else
        return -1;
    Py_ssize_t n_digits = i - d0;
    int64_t exp10 = 0;
    int integer = 1;
    if (buf[i] == '.') {
        integer = 0;
        Py_ssize_t f0 = ++i;
        i = read_digits(buf, i, size, &man);
        if (i == f0)
            return -1;
        exp10 = f0 - i;
        n_digits += i - f0;
    }
    if (buf[i] == 'e' || buf[i] == 'E') {
        integer = 0;
        i = read_exponent(buf, i + 1, &exp10);
        if (i < 0)
            return -1;
    }
    *ok = 1;
    if (n_digits > 19)
        *ok = 0;
    else if (integer && man == 0)
        *value = 0.0; /* float(int("-0")) is +0.0 */
    else
        *value = signed_decimal(man, exp10, neg, ok);
    return i;
}

typedef struct {
    int32_t *slots;
    double *values;
    Py_ssize_t cap, nnz;
    int64_t *slow;
    Py_ssize_t slow_cap, n_slow;
} SparseOut;

/* One object's members at buf[i] == '{' into out (features), keys stamped `row` (its
   object inside stamped row + 1); the label key's value span into (ls, le) when label_len >= 0
   (-1: no label here), where a "y" member's value starts into ys; an "x" member whose value is
   an object: its members read as features and *nested set (nested NULL: such a member is not
   plain); members: how many; own: the features of this object's own members. Returns the index after the closing brace; -1 not plain, -2 no memory,
   -3 slow full. */
static Py_ssize_t sparse_object(SparseTable *t, SparseOut *out, const unsigned char *buf,
                                Py_ssize_t size, Py_ssize_t i, Py_ssize_t row,
                                const unsigned char *label, Py_ssize_t label_len,
                                Py_ssize_t *ls, Py_ssize_t *le, Py_ssize_t *ys, int *nested,
                                Py_ssize_t *members, Py_ssize_t *own,
                                const unsigned char *jkey, Py_ssize_t jkey_len, int64_t *kspan)
{
    i = skip_ws(buf, i + 1);
    *members = 0;
    *own = 0;
    if (buf[i] == '}')
        return i + 1;
    for (;;) {
        if (buf[i] != '"')
            return -1;
        Py_ssize_t ks, kl, end = sparse_string(t, i, &ks, &kl);
        if (end < 0)
            return end;
        const unsigned char *k = sparse_text(t, ks);
        i = skip_ws(buf, end);
        if (buf[i] != ':')
            return -1;
        i = skip_ws(buf, i + 1);
        ++*members;
        SparseEntry *key = sparse_entry(t, ks, kl, 0, -1);
        if (key == NULL)
            return -2;
        if (key->stamp == row)
            return -1; /* a key given twice */
        key->stamp = row;
        unsigned char c = buf[i];
        int is_label = label_len >= 0 && kl == label_len && memcmp(k, label, kl) == 0;
        if (kl == 1 && k[0] == 'y') {
            *ys = i;
        }
        if (kl == 1 && k[0] == 'x' && c == '{' && nested != NULL) {
            /* the nested form's features, read here; the caller checks the form */
            Py_ssize_t ms = 0, unused_s = -1, unused_e = -1, unused_y = -1, inner_own = 0;
            i = sparse_object(t, out, buf, size, i, row + 1, label, -1, &unused_s, &unused_e,
                              &unused_y, NULL, &ms, &inner_own, NULL, -1, NULL);
            if (i < 0)
                return i;
            *nested = 1;
        }
        else if (c == '"' && jkey_len >= 0 && kl == jkey_len && memcmp(k, jkey, kl) == 0) {
            /* the join key's string: its span, not a feature (one with an escape: not plain) */
            Py_ssize_t vs, vl, vend = sparse_string(t, i, &vs, &vl);
            if (vend < 0)
                return vend;
            if (vs >= t->size)
                return -1;
            kspan[0] = vs;
            kspan[1] = vl;
            i = vend;
        }
        else if (is_label) {
            Py_ssize_t start = i;
            if (c == '"') {
                i++; /* escapes allowed: the label cache decodes the text */
                while (buf[i] != '"') {
                    if (buf[i] == '\n')
                        return -1;
                    i += buf[i] == '\\' && buf[i + 1] != '\n' ? 2 : 1;
                }
                i++;
            }
            else if (c == '{' || c == '[') {
                return -1;
            }
            else {
                while (buf[i] != ',' && buf[i] != '}' && buf[i] != ' ' && buf[i] != '\t' &&
                       buf[i] != '\r' && buf[i] != '\n')
                    i++;
            }
            *ls = start;
            *le = i;
        }
        else {
            Py_ssize_t start = i;
            double value = 1.0;
            int ok = 1;
            SparseEntry *feature = key;
            if (c == '"') {
                Py_ssize_t vs, vl, vend = sparse_string(t, i, &vs, &vl);
                if (vend < 0)
                    return vend;
                feature = sparse_entry(t, ks, kl, vs, vl);
                if (feature == NULL)
                    return -2;
                if (feature->stamp == row)
                    return -1;
                feature->stamp = row;
                i = vend;
            }
            else if (c == 't' && i + 4 <= size && memcmp(buf + i, "true", 4) == 0) {
                i += 4;
            }
            else if (c == 'f' && i + 5 <= size && memcmp(buf + i, "false", 5) == 0) {
                value = 0.0;
                i += 5;
            }
            else if (c == 'n' && i + 4 <= size && memcmp(buf + i, "null", 4) == 0) {
                feature = NULL; /* missing */
                i += 4;
            }
            else {
                i = json_number(buf, i, size, &value, &ok);
                if (i < 0)
                    return -1;
            }
            if (feature != NULL) {
                int32_t slot = sparse_slot(t, feature);
                if (slot < 0)
                    return -2;
                if (out->nnz == out->cap)
                    return -1; /* cannot happen: cap bounds the items a block can hold */
                out->slots[out->nnz] = slot;
                out->values[out->nnz] = value;
                if (!ok) {
                    if (out->n_slow == out->slow_cap)
                        return -3;
                    int64_t *s = out->slow + 4 * out->n_slow++;
                    s[0] = start;
                    s[1] = i;
                    s[2] = out->nnz;
                    s[3] = 0;
                }
                out->nnz++;
                ++*own;
            }
        }
        i = skip_ws(buf, i);
        if (buf[i] == '}')
            return i + 1;
        if (buf[i] != ',')
            return -1;
        i = skip_ws(buf, i + 1);
    }
}

/* The scan of n lines (buf ends with a newline): 0 done, 2 slow full, 3 not plain, 4 no
   memory. indptr gets n + 1 entries. jkey_len >= 0: the member jkey whose value is a string is
   the join key, no feature: its text's span (start, length) into kspans (2 n; -1, 0 when a
   line has none; a key whose string has an escape, and the nested form, are not plain). */
static int scan_sparse_jsonl(SparseTable *t, SparseOut *out, const unsigned char *buf,
                             Py_ssize_t size, Py_ssize_t n, const unsigned char *label,
                             Py_ssize_t label_len, int64_t *indptr, unsigned char *labels,
                             Py_ssize_t *n_labels_out, const unsigned char *jkey,
                             Py_ssize_t jkey_len, int64_t *kspans)
{
    Py_ssize_t i = 0, row = 0, n_labels = 0;
    const int label_is_y = label_len == 1 && label[0] == 'y';
    indptr[0] = 0;
    while (i < size) {
        if (row >= n)
            return 3;
        i = skip_ws(buf, i);
        if (buf[i] != '{')
            return 3;
        Py_ssize_t ls = -1, le = -1, ys = -1, members = 0, own = 0;
        int nested = 0;
        int64_t unkeyed[2], *kspan = kspans != NULL ? kspans + 2 * row : unkeyed;
        kspan[0] = -1;
        kspan[1] = 0;
        Py_ssize_t end = sparse_object(t, out, buf, size, i, 2 * row + 1, label, label_len, &ls,
                                       &le, &ys, &nested, &members, &own, jkey, jkey_len, kspan);
        if (end == -2)
            return 4;
        if (end == -3)
            return 2;
        if (end < 0)
            return 3;
        /* {"x": {...}} or {"x": {...}, "y": label}: the nested form (any other member beside
           an object "x" makes a flat object holding an object: refused there) */
        if (nested && (own != 0 || !(members == 1 || (members == 2 && ys >= 0))))
            return 3;
        if (nested && members == 2 && !label_is_y)
            return 3; /* "y" read as a feature of the flat form: let the record path say */
        if (nested && jkey_len >= 0)
            return 3; /* joined lines: flat objects only */
        i = skip_ws(buf, end);
        if (buf[i] != '\n')
            return 3;
        i++;
        if (row)
            labels[n_labels++] = '\n';
        if (ls >= 0) {
            memcpy(labels + n_labels, buf + ls, le - ls);
            n_labels += le - ls;
        }
        else {
            memcpy(labels + n_labels, "null", 4);
            n_labels += 4;
        }
        row++;
        indptr[row] = out->nnz;
    }
    *n_labels_out = n_labels;
    return row == n ? 0 : 3;
}

/* The names of the table's slots, as str (a string feature's "key=value"); NULL with
   *undecodable set when one is not UTF-8 (no error set then), NULL with an error otherwise. */
static PyObject *sparse_names(const SparseTable *t, int *undecodable)
{
    PyObject *names = PyList_New(t->n_slots);
    if (names == NULL)
        return NULL;
    char *tmp = NULL;
    size_t tmp_cap = 0;
    for (int32_t k = 0; k < t->n_slots; k++) {
        const Py_ssize_t *span = t->slot_spans + 4 * (size_t)k;
        const char *text = (const char *)sparse_text(t, span[0]);
        Py_ssize_t len = span[1];
        if (span[3] >= 0) {
            len = span[1] + 1 + span[3];
            if ((size_t)len > tmp_cap) {
                char *grown = PyMem_Realloc(tmp, (size_t)len);
                if (grown == NULL) {
                    PyMem_Free(tmp);
                    Py_DECREF(names);
                    return PyErr_NoMemory();
                }
                tmp = grown;
                tmp_cap = (size_t)len;
            }
            memcpy(tmp, text, span[1]);
            tmp[span[1]] = '=';
            memcpy(tmp + span[1] + 1, sparse_text(t, span[2]), span[3]);
            text = tmp;
        }
        PyObject *name = PyUnicode_DecodeUTF8(text, len, NULL);
        if (name == NULL) {
            PyMem_Free(tmp);
            Py_DECREF(names);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                *undecodable = 1;
            }
            return NULL;
        }
        PyList_SET_ITEM(names, k, name);
    }
    PyMem_Free(tmp);
    return names;
}

/* -- the sparse libsvm scanner --------------------------------------------------------------
 *
 * LibsvmParser.parse (the reference) over a block: a line's text up to its first '#', split
 * at Python's ASCII whitespace (str.split), an optional first token without ':' the label
 * (copied into labels; "" when absent), then name:value tokens (qid:... skipped), the value
 * decided by parse_decimal or left to Python's float() (slow). Status 3 for a line of another
 * form: a byte >= 0x80 before the '#' (str.split splits at some of those), no token, a
 * malformed token, a name given twice.
 */

static inline int split_space(unsigned char c)
{
    return c == ' ' || (c >= 9 && c <= 13) || (c >= 28 && c <= 31);
}

/* A libsvm token's bytes by class, one look-up each: 0 within a token, 1 a split_space (ends
   it), 2 '#' (ends it), 3 ':', 4 a byte >= 0x80 (the line is refused). */
static const unsigned char token_class[256] = {
#define R16(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0,         /* 0x00-0x0F: 9-13 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1,         /* 0x10-0x1F: 28-31 */
    1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,         /* 0x20-0x2F: ' ', '#' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0,         /* 0x30-0x3F: ':' */
    R16(0), R16(0), R16(0), R16(0),                         /* 0x40-0x7F */
    R16(4), R16(4), R16(4), R16(4), R16(4), R16(4), R16(4), R16(4), /* 0x80-0xFF */
#undef R16
};

static int scan_sparse_libsvm(SparseTable *t, SparseOut *out, const unsigned char *buf,
                              Py_ssize_t size, Py_ssize_t n, int64_t *indptr,
                              unsigned char *labels, Py_ssize_t *n_labels_out)
{
    Py_ssize_t i = 0, row = 0, n_labels = 0;
    indptr[0] = 0;
    while (i < size) {
        if (row >= n)
            return 3;
        Py_ssize_t tokens = 0;
        Py_ssize_t stamp = row + 1;
        if (row)
            labels[n_labels++] = '\n';
        for (;;) {
            while (buf[i] != '\n' && split_space(buf[i]))
                i++;
            unsigned char c = buf[i];
            if (c == '\n' || c == '#')
                break;
            Py_ssize_t start = i, colon = -1;
            int second_colon = 0;
            double value = 0.0;
            int ok = 0, read = 0; /* read: value and ok are json_number's of the whole value */
            unsigned char k;
            while ((k = token_class[buf[i]]) == 0)
                i++;
            if (k == 3) {
                /* the usual token, name:number: the number read where it stands, up to the
                   token's end (its bytes are all of class 0), not scanned twice */
                colon = i;
                Py_ssize_t e = json_number(buf, colon + 1, size, &value, &ok);
                if (e > colon + 1 && (token_class[buf[e]] == 1 || token_class[buf[e]] == 2)) {
                    i = e;
                    read = 1;
                }
                else {
                    i = colon + 1;
                }
            }
            for (; !read;) { /* to a split_space or '#' */
                while ((k = token_class[buf[i]]) == 0)
                    i++;
                if (k == 3) {
                    if (colon >= 0)
                        second_colon = 1;
                    else
                        colon = i;
                    i++;
                    continue;
                }
                if (k == 4)
                    return 3;
                break;
            }
            Py_ssize_t end = i;
            tokens++;
            if (colon < 0) {
                if (tokens != 1)
                    return 3; /* a token without ':' after the first: malformed */
                memcpy(labels + n_labels, buf + start, end - start);
                n_labels += end - start;
                continue;
            }
            if (second_colon || colon == start || colon == end - 1)
                return 3;
            Py_ssize_t kl = colon - start;
            if (kl == 3 && memcmp(buf + start, "qid", 3) == 0)
                continue;
            SparseEntry *key = sparse_entry(t, start, kl, 0, -1);
            if (key == NULL)
                return 4;
            if (key->stamp == stamp)
                return 3;
            key->stamp = stamp;
            int32_t slot = sparse_slot(t, key);
            if (slot < 0)
                return 4;
            /* the common form at JSON's grammar's speed (an integer's -0 is float()'s -0.0
               here), anything else by the careful parser */
            if (!read || !ok)
                ok = parse_decimal(buf, colon + 1, end, &value);
            else if (value == 0.0 && buf[colon + 1] == '-')
                value = -0.0;
            if (out->nnz == out->cap)
                return 3;
            out->slots[out->nnz] = slot;
            out->values[out->nnz] = value;
            if (!ok) {
                if (out->n_slow == out->slow_cap)
                    return 2;
                int64_t *s = out->slow + 4 * out->n_slow++;
                s[0] = colon + 1;
                s[1] = end;
                s[2] = out->nnz;
                s[3] = 0;
            }
            out->nnz++;
        }
        if (tokens == 0)
            return 3; /* an empty line, or a comment alone */
        while (buf[i] != '\n')
            i++;
        i++;
        row++;
        indptr[row] = out->nnz;
    }
    *n_labels_out = n_labels;
    return row == n ? 0 : 3;
}

PyDoc_STRVAR(scan_sparse_doc,
"scan_sparse(buf, n, label, indptr, slots, values, labels, slow)\n"
"    -> (status, nnz, n_labels, n_slow, names)\n\n"
"``buf`` (bytes ending with a newline) holds ``n`` JSON objects, one a line, of any key set\n"
"(see scan_sparse_jsonl in _dense.c), ``label`` the label key (UTF-8 bytes); or, ``label``\n"
"None, ``n`` libsvm lines (scan_sparse_libsvm). indptr int64\n"
"(n + 1), slots int32 and values float64 (len(buf) // 4 + n items at least), labels uint8\n"
"(len(buf) + 4 * n), slow int64 (k, 4). ``names``: the local slots' feature names (None\n"
"unless status is 0). Status 0 done, 2 slow is full, 3 a line of another form.\n\n"
"scan_sparse(buf, n, label, indptr, slots, values, labels, slow, key, spans)\n"
"    -> (status, nnz, n_labels, n_slow, names, keys)\n\n"
"JSON lines joined by the member ``key`` (UTF-8 bytes): a string value of it is no feature\n"
"but the line's key, ``keys`` a str or None (none, or empty) a line; spans int64 (2 n).");

/* Each line's key (str; None: none or empty) from the spans the scan gave. */
static PyObject *join_keys(const unsigned char *buf, const int64_t *spans, Py_ssize_t n)
{
    PyObject *keys = PyList_New(n);
    if (keys == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *key;
        if (spans[2 * r] < 0 || spans[2 * r + 1] == 0) {
            key = Py_None;
            Py_INCREF(key);
        }
        else {
            key = PyUnicode_DecodeUTF8((const char *)buf + spans[2 * r], spans[2 * r + 1], NULL);
            if (key == NULL) {
                Py_DECREF(keys);
                return NULL;
            }
        }
        PyList_SET_ITEM(keys, r, key);
    }
    return keys;
}

static PyObject *py_scan_sparse(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_indptr, *o_slots, *o_values, *o_labels, *o_slow, *o_spans = NULL;
    Py_ssize_t n;
    const char *label, *jkey = NULL;
    Py_ssize_t label_len, jkey_len = -1;
    if (!PyArg_ParseTuple(args, "Onz#OOOOO|z#O", &o_buf, &n, &label, &label_len, &o_indptr,
                          &o_slots, &o_values, &o_labels, &o_slow, &jkey, &jkey_len, &o_spans))
        return NULL;
    if (jkey == NULL)
        jkey_len = -1;
    if (jkey != NULL && (o_spans == NULL || label == NULL)) {
        PyErr_SetString(PyExc_ValueError, "a join key needs JSON lines and spans");
        return NULL;
    }
    if (!tables_ready) {
        PyErr_SetString(PyExc_RuntimeError, "call set_tables first");
        return NULL;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "bad n");
        return NULL;
    }
    Py_buffer v[7];
    if (get_buffer(o_buf, &v[0], 0, 1, "buf") < 0)
        return NULL;
    Py_ssize_t size = v[0].len;
    int keyed = jkey != NULL, n_views = keyed ? 7 : 6;
    if (((const unsigned char *)v[0].buf)[size - 1] != '\n') {
        PyBuffer_Release(&v[0]);
        PyErr_SetString(PyExc_ValueError, "buf must end with a newline");
        return NULL;
    }
    Py_ssize_t cap = size / 4 + n;
    const BufferSpec specs[6] = {
        {o_indptr, 1, (n + 1) * (Py_ssize_t)sizeof(int64_t), "indptr"},
        {o_slots, 1, cap * (Py_ssize_t)sizeof(int32_t), "slots"},
        {o_values, 1, cap * (Py_ssize_t)sizeof(double), "values"},
        {o_labels, 1, size + 4 * n, "labels"},
        {o_slow, 1, 0, "slow"},
        {o_spans, 1, 2 * n * (Py_ssize_t)sizeof(int64_t), "spans"},
    };
    if (get_buffers(specs, v + 1, n_views - 1) < 0) {
        PyBuffer_Release(&v[0]);
        return NULL;
    }
    SparseTable t = {v[0].buf, size, NULL, 0, 0, 0, NULL, 0, NULL, 0, 0};
    SparseOut out = {v[2].buf, v[3].buf, cap, 0, v[5].buf,
                     v[5].len / (4 * (Py_ssize_t)sizeof(int64_t)), 0};
    Py_ssize_t n_labels = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    if (label == NULL)
        status = scan_sparse_libsvm(&t, &out, v[0].buf, size, n, v[1].buf, v[4].buf, &n_labels);
    else
        status = scan_sparse_jsonl(&t, &out, v[0].buf, size, n, (const unsigned char *)label,
                                   label_len, v[1].buf, v[4].buf, &n_labels,
                                   (const unsigned char *)jkey, jkey_len,
                                   keyed ? v[6].buf : NULL);
    Py_END_ALLOW_THREADS
    PyObject *names = NULL, *keys = NULL;
    if (status == 0) {
        int undecodable = 0;
        names = sparse_names(&t, &undecodable);
        if (names != NULL && keyed) {
            keys = join_keys(v[0].buf, v[6].buf, n);
            if (keys == NULL)
                Py_CLEAR(names);
        }
        if (names == NULL && !undecodable) {
            free(t.entries);
            free(t.slot_spans);
            free(t.arena);
            release_buffers(v, n_views);
            return NULL;
        }
        if (names == NULL)
            status = 3;
    }
    free(t.entries);
    free(t.slot_spans);
    free(t.arena);
    release_buffers(v, n_views);
    if (status == 4) {
        Py_XDECREF(names);
        Py_XDECREF(keys);
        return PyErr_NoMemory();
    }
    if (names == NULL) {
        names = Py_None;
        Py_INCREF(names);
    }
    if (!keyed)
        return Py_BuildValue("innnN", status, out.nnz, n_labels, out.n_slow, names);
    if (keys == NULL) {
        keys = Py_None;
        Py_INCREF(keys);
    }
    return Py_BuildValue("innnNN", status, out.nnz, n_labels, out.n_slow, names, keys);
}

/* -- the sparse CSV scanner -----------------------------------------------------------------
 *
 * CsvParser._parse_checked (the reference) over lines with empty cells: each line of ncol
 * cells, the label cell copied into labels (joined by newlines), every other non-empty cell a
 * feature whose slot is its column (the label's left out), its value decided by
 * parse_decimal or left to Python's float() (slow); an empty cell is a missing feature.
 * Status 3 for a line of another form (a quote, another cell count), 2 slow is full.
 */
static int scan_sparse_csv(const unsigned char *buf, Py_ssize_t size, Py_ssize_t n,
                           Py_ssize_t ncol, Py_ssize_t label_col, int64_t *indptr,
                           SparseOut *out, unsigned char *labels, Py_ssize_t *n_labels_out)
{
    Py_ssize_t i = 0, row = 0, col = 0, n_labels = 0;
    indptr[0] = 0;
    while (i < size) {
        if (row >= n)
            return 3;
        Py_ssize_t start = i;
        while (buf[i] != ',' && buf[i] != '\n') {
            if (buf[i] == '"')
                return 3;
            i++;
        }
        if (col >= ncol)
            return 3;
        if (col == label_col) {
            if (row)
                labels[n_labels++] = '\n';
            memcpy(labels + n_labels, buf + start, i - start);
            n_labels += i - start;
        }
        else if (i > start) {
            double value = 0.0;
            int ok = parse_decimal(buf, start, i, &value);
            if (out->nnz == out->cap)
                return 3;
            out->slots[out->nnz] = (int32_t)(col < label_col ? col : col - 1);
            out->values[out->nnz] = value;
            if (!ok) {
                if (out->n_slow == out->slow_cap)
                    return 2;
                int64_t *s = out->slow + 4 * out->n_slow++;
                s[0] = start;
                s[1] = i;
                s[2] = out->nnz;
                s[3] = 0;
            }
            out->nnz++;
        }
        if (buf[i] == '\n') {
            if (col != ncol - 1)
                return 3;
            row++;
            indptr[row] = out->nnz;
            col = 0;
        }
        else {
            col++;
        }
        i++;
    }
    *n_labels_out = n_labels;
    return row == n ? 0 : 3;
}

PyDoc_STRVAR(scan_sparse_csv_doc,
"scan_sparse_csv(buf, n, ncol, label_col, indptr, slots, values, labels, slow)\n"
"    -> (status, nnz, n_labels, n_slow)\n\n"
"``buf`` (bytes ending with a newline) holds ``n`` CSV lines of ``ncol`` cells, the label in\n"
"column ``label_col``, empty cells missing: CSR rows whose slot is the column (the label's\n"
"left out). indptr int64 (n + 1), slots int32 and values float64 (n * (ncol - 1)), labels\n"
"uint8 (len(buf)), slow int64 (k, 4). Status 0 done, 2 slow is full, 3 another form.");

static PyObject *py_scan_sparse_csv(PyObject *self, PyObject *args)
{
    PyObject *o_buf, *o_indptr, *o_slots, *o_values, *o_labels, *o_slow;
    Py_ssize_t n, ncol, label_col;
    if (!PyArg_ParseTuple(args, "OnnnOOOOO", &o_buf, &n, &ncol, &label_col, &o_indptr,
                          &o_slots, &o_values, &o_labels, &o_slow))
        return NULL;
    if (!tables_ready) {
        PyErr_SetString(PyExc_RuntimeError, "call set_tables first");
        return NULL;
    }
    if (n < 0 || ncol < 1 || label_col < 0 || label_col >= ncol) {
        PyErr_SetString(PyExc_ValueError, "bad n, ncol or label_col");
        return NULL;
    }
    Py_buffer v[6];
    if (get_buffer(o_buf, &v[0], 0, 1, "buf") < 0)
        return NULL;
    Py_ssize_t size = v[0].len;
    if (((const unsigned char *)v[0].buf)[size - 1] != '\n') {
        PyBuffer_Release(&v[0]);
        PyErr_SetString(PyExc_ValueError, "buf must end with a newline");
        return NULL;
    }
    Py_ssize_t cap = n * (ncol - 1);
    const BufferSpec specs[5] = {
        {o_indptr, 1, (n + 1) * (Py_ssize_t)sizeof(int64_t), "indptr"},
        {o_slots, 1, cap * (Py_ssize_t)sizeof(int32_t), "slots"},
        {o_values, 1, cap * (Py_ssize_t)sizeof(double), "values"},
        {o_labels, 1, size, "labels"},
        {o_slow, 1, 0, "slow"},
    };
    if (get_buffers(specs, v + 1, 5) < 0) {
        PyBuffer_Release(&v[0]);
        return NULL;
    }
    SparseOut out = {v[2].buf, v[3].buf, cap, 0, v[5].buf,
                     v[5].len / (4 * (Py_ssize_t)sizeof(int64_t)), 0};
    Py_ssize_t n_labels = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_sparse_csv(v[0].buf, size, n, ncol, label_col, v[1].buf, &out, v[4].buf,
                             &n_labels);
    Py_END_ALLOW_THREADS
    release_buffers(v, 6);
    return Py_BuildValue("innn", status, out.nnz, n_labels, out.n_slow);
}

PyDoc_STRVAR(remap_slots_doc,
"remap_slots(slots, mapping) -> None\n\n"
"``slots[k] = mapping[slots[k]]`` for each int32 slot (``0 <= slots[k] < len(mapping)``, else\n"
"ValueError, slots unchanged): a piece's own slots as the block's.");

static PyObject *py_remap_slots(PyObject *self, PyObject *args)
{
    PyObject *o_slots, *o_map;
    if (!PyArg_ParseTuple(args, "OO", &o_slots, &o_map))
        return NULL;
    const BufferSpec specs[2] = {{o_slots, 1, 0, "slots"}, {o_map, 0, 0, "mapping"}};
    Py_buffer v[2];
    if (get_buffers(specs, v, 2) < 0)
        return NULL;
    int32_t *slots = v[0].buf;
    const int32_t *map = v[1].buf;
    Py_ssize_t n = v[0].len / (Py_ssize_t)sizeof(int32_t);
    Py_ssize_t m = v[1].len / (Py_ssize_t)sizeof(int32_t);
    for (Py_ssize_t k = 0; k < n; k++) {
        if (slots[k] < 0 || slots[k] >= m) {
            release_buffers(v, 2);
            PyErr_Format(PyExc_ValueError, "slots[%zd] = %d is outside the mapping", k,
                         (int)slots[k]);
            return NULL;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        slots[k] = map[slots[k]];
    release_buffers(v, 2);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(shift_indptr_doc,
"shift_indptr(dst, src, delta) -> None\n\n"
"``dst[k] = src[k] + delta`` for each int64 of ``src`` (``dst`` as long at least; the two may\n"
"overlap, ``dst`` starting at or before ``src``): a piece's row starts as the block's.");

static PyObject *py_shift_indptr(PyObject *self, PyObject *args)
{
    PyObject *o_dst, *o_src;
    long long delta;
    if (!PyArg_ParseTuple(args, "OOL", &o_dst, &o_src, &delta))
        return NULL;
    Py_buffer v[2];
    if (get_buffer(o_src, &v[1], 0, 0, "src") < 0)
        return NULL;
    if (get_buffer(o_dst, &v[0], 1, v[1].len, "dst") < 0) {
        PyBuffer_Release(&v[1]);
        return NULL;
    }
    int64_t *dst = v[0].buf;
    const int64_t *src = v[1].buf;
    if ((const char *)dst > (const char *)src && (const char *)dst < (const char *)src + v[1].len) {
        release_buffers(v, 2);
        PyErr_SetString(PyExc_ValueError, "dst must not start inside src");
        return NULL;
    }
    Py_ssize_t n = v[1].len / (Py_ssize_t)sizeof(int64_t);
    for (Py_ssize_t k = 0; k < n; k++)
        dst[k] = src[k] + delta;
    release_buffers(v, 2);
    Py_RETURN_NONE;
}

/* -- the other learners over sparse rows ------------------------------------------------------
 *
 * The multi-class kernels' rules over CSR rows, as _rules.h's rules do the binary learners':
 * a row's folds (dot, udot, sq) run over its items only, in the
 * row's order; an update adds a * v to each of the row's entries of a weight array (w.get(k,
 * 0.0) + a * v, the reference's add_scaled); an entry the model's dict did not have yet joins
 * it then, its slot appended to that dict's list of new slots (the order new keys enter the
 * dict). The multi-class kernels keep such a list per class (and per dict: weights and, when
 * averaged, accumulators), their arrays (n_classes, m): a new class's row starts empty.
 */

/* The CSR rows' indptr (int64, n + 1, rising from 0) into *iv: their nnz, or -1 (an exception
   set, nothing held). */
static Py_ssize_t get_indptr(PyObject *o_indptr, Py_buffer *iv, Py_ssize_t n)
{
    if (get_buffer(o_indptr, iv, 0, (n + 1) * (Py_ssize_t)sizeof(int64_t), "indptr") < 0)
        return -1;
    const int64_t *indptr = iv->buf;
    int ok = indptr[0] == 0 && indptr[n] >= 0;
    for (Py_ssize_t i = 0; ok && i < n; i++)
        ok = indptr[i] <= indptr[i + 1];
    if (!ok) {
        PyBuffer_Release(iv);
        PyErr_SetString(PyExc_ValueError, "indptr must rise from 0");
        return -1;
    }
    return (Py_ssize_t)indptr[n];
}

/* Whether the nnz slots are all in [0, m); ValueError set otherwise. */
static int slots_in_range(const int32_t *slots, Py_ssize_t nnz, Py_ssize_t m)
{
    for (Py_ssize_t k = 0; k < nnz; k++) {
        if (slots[k] < 0 || slots[k] >= m) {
            PyErr_SetString(PyExc_ValueError, "slots must be in [0, m)");
            return 0;
        }
    }
    return 1;
}

/* Whether each label is -1, a known class or the next new one (classes come in order), below
   n_classes; ValueError set otherwise. */
static int labels_in_order(const int64_t *lab, Py_ssize_t n, Py_ssize_t n_active,
                           Py_ssize_t n_classes)
{
    for (Py_ssize_t i = 0, next = n_active; i < n; i++) {
        if (lab[i] >= n_classes || lab[i] < -1 || lab[i] > next) {
            PyErr_SetString(PyExc_ValueError, "labels: -1, a known class, or the next new one");
            return 0;
        }
        if (lab[i] == next)
            next++;
    }
    return 1;
}

/* -- the binary perceptron's blocks ----------------------------------------------------------- */

#define BLOCK_DENSE 0
#define BLOCK_DENSE32 1
#define BLOCK_SPARSE 2

/* Where a block stopped: the row (-1: none) and why (ROW_REFUSED, ROW_NONFINITE). */
typedef struct {
    Py_ssize_t row;
    int why;
    Py_ssize_t n_factors;
} BlockEnd;

#define RULE_PERCEPTRON 0 /* BinaryRule, binary_rule_row */
#define RULE_PA 1         /* PaRule, pa_rule_row */

/* A rule's rows over the n rows of a block of kind `kind` (both constants in each variant
 * below): dense, X (n, d), or sparse, CSR. */
static inline __attribute__((always_inline)) void
block_of(int rule, int kind, const void *X, const int64_t *indptr, const int32_t *slots,
         Py_ssize_t n, Py_ssize_t d, Py_ssize_t m, const int8_t *signs, void *r, RuleCells *c,
         int8_t *preds, double *factors, BlockEnd *end)
{
    long long *mistakes = rule == RULE_PA ? &((PaRule *)r)->n_mistakes
                                          : &((BinaryRule *)r)->n_mistakes;
    for (Py_ssize_t i = 0; i < n; i++) {
        RuleRow row = {d, NULL, NULL, NULL, NULL, NULL};
        if (kind == BLOCK_SPARSE) {
            const Py_ssize_t k0 = (Py_ssize_t)indptr[i];
            row.n = (Py_ssize_t)indptr[i + 1] - k0;
            row.slots32 = slots + k0;
            row.values = (const double *)X + k0;
        }
        else if (kind == BLOCK_DENSE32)
            row.values32 = (const float *)X + i * d;
        else
            row.values = (const double *)X + i * d;
        long long before = *mistakes;
        double factor = 0.0;
        int got = rule == RULE_PA ? pa_rule_row(r, c, &row, signs[i], &preds[i])
                                  : binary_rule_row(r, c, &row, signs[i], m, &preds[i], &factor);
        if (got != ROW_DONE) {
            end->row = i;
            end->why = got;
            return;
        }
        if (factor != 0.0)
            factors[end->n_factors++] = factor;
        if (kind != BLOCK_SPARSE && *mistakes != before)
            c->all_w = 1; /* a dense row's update gives every slot its weight */
    }
}

#define BLOCK_VARIANT(name, rule, kind)                                                       \
    static void KERNEL_CLONES name(const void *X, const int64_t *indptr, const int32_t *slots, \
                                   Py_ssize_t n, Py_ssize_t d, Py_ssize_t m,                  \
                                   const int8_t *signs, void *r, RuleCells *c, int8_t *preds, \
                                   double *factors, BlockEnd *end)                            \
    {                                                                                         \
        block_of(rule, kind, X, indptr, slots, n, d, m, signs, r, c, preds, factors, end);   \
    }
BLOCK_VARIANT(binary_block_dense, RULE_PERCEPTRON, BLOCK_DENSE)
BLOCK_VARIANT(binary_block_dense32, RULE_PERCEPTRON, BLOCK_DENSE32)
BLOCK_VARIANT(binary_block_sparse, RULE_PERCEPTRON, BLOCK_SPARSE)
BLOCK_VARIANT(pa_block_dense, RULE_PA, BLOCK_DENSE)
BLOCK_VARIANT(pa_block_sparse, RULE_PA, BLOCK_SPARSE)

typedef void (*BlockFn)(const void *, const int64_t *, const int32_t *, Py_ssize_t, Py_ssize_t,
                        Py_ssize_t, const int8_t *, void *, RuleCells *, int8_t *, double *,
                        BlockEnd *);

/* A block kernel's call: o the buffers (X, indptr, slots, signs, w, u, present, joined_w,
 * joined_u, preds, factors) checked and held, fns' variant for the block's kind (dense,
 * float32, sparse) run without the GIL on rule r, the cells (their joined slots) into *c and
 * where the block stopped into *end. Py_None; NULL on error. */
static PyObject *run_block(PyObject *o[11], Py_ssize_t n, Py_ssize_t d, Py_ssize_t m, int f32,
                           int forgetting, const BlockFn fns[3], void *r, RuleCells *c,
                           BlockEnd *end)
{
    int sparse = o[1] != Py_None;
    if (n < 0 || d < 0 || m < 0 || (!sparse && m != d) || (sparse && f32) ||
        (f32 && fns[1] == NULL)) {
        PyErr_SetString(PyExc_ValueError, "bad n, d or m");
        return NULL;
    }
    Py_buffer iv;
    Py_ssize_t nnz = n * d;
    if (sparse && (nnz = get_indptr(o[1], &iv, n)) < 0)
        return NULL;
    const BufferSpec specs[10] = {
        {o[0], 0, nnz * (Py_ssize_t)(f32 ? sizeof(float) : sizeof(double)), "X"},
        {o[3], 0, n, "signs"},
        {o[4], 1, m * (Py_ssize_t)sizeof(double), "w"},
        {o[5], 1, m * (Py_ssize_t)sizeof(double), "u"},
        {o[6], 1, m, "present"},
        {o[7], 1, m * (Py_ssize_t)sizeof(Py_ssize_t), "joined_w"},
        {o[8], 1, m * (Py_ssize_t)sizeof(Py_ssize_t), "joined_u"},
        {o[9], 1, n, "preds"},
        {o[10], 1, (forgetting ? n : 0) * (Py_ssize_t)sizeof(double), "factors"},
        {sparse ? o[2] : o[3], 0, sparse ? nnz * (Py_ssize_t)sizeof(int32_t) : 0, "slots"},
    };
    Py_buffer v[10];
    if (get_buffers(specs, v, 10) < 0) {
        if (sparse)
            PyBuffer_Release(&iv);
        return NULL;
    }
    if (sparse && !slots_in_range(v[9].buf, nnz, m)) {
        release_buffers(v, 10);
        PyBuffer_Release(&iv);
        return NULL;
    }
    RuleCells cells = {v[2].buf, v[3].buf, v[4].buf, 1, v[5].buf, v[6].buf, 0, 0, !sparse};
    const unsigned char *present = v[4].buf;
    for (Py_ssize_t j = 0; cells.all_w && j < m; j++)
        cells.all_w = present[j] & RULE_W;
    BlockFn fn = sparse ? fns[2] : f32 ? fns[1] : fns[0];
    const int64_t *indptr = sparse ? iv.buf : NULL;
    const int32_t *slots = sparse ? v[9].buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    fn(v[0].buf, indptr, slots, n, d, m, v[1].buf, r, &cells, v[7].buf, v[8].buf, end);
    Py_END_ALLOW_THREADS
    release_buffers(v, 10);
    if (sparse)
        PyBuffer_Release(&iv);
    *c = cells;
    return Py_None;
}

PyDoc_STRVAR(kernel_binary_doc,
"kernel_binary(X, indptr, slots, signs, w, u, present, joined_w, joined_u, preds, factors,\n"
"              n, d, m, f32, rule)\n"
"    -> (rule, n_joined_w, n_joined_u, n_factors, stopped, why)\n\n"
"The binary perceptron over a block (learners/_binary_kernel.py): dense, X float64 (n, d) or\n"
"float32 with f32, indptr and slots None, m = d; or sparse, X the float64 values of n CSR\n"
"rows (indptr int64 n + 1, slots int32 in [0, m)). signs int8 (n; 0 unlabelled); the\n"
"cells w, u float64 (m), present uint8 (m: bits 1 weight, 2 accumulator in the model),\n"
"written in place; joined_w, joined_u int64 (m): the slots that joined, in order; preds int8\n"
"(n); factors float64 (n): the renormalisations' factors. rule: (lr, lr_int, bias_mode,\n"
"averaged, half_life, beta, b, ub, max_norm, n_seen, n_mistakes, avg_ref), given back\n"
"learned. stopped: the row the kernel stopped at (-1: none), why 1 refused (learning it\n"
"would make the model non-finite), 2 a value not finite; the cells partly written then.");

static PyObject *py_kernel_binary(PyObject *self, PyObject *args)
{
    PyObject *o[11];
    Py_ssize_t n, d, m;
    int f32;
    BinaryRule r;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOnnnp(dpipdddddLLL)", &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &n, &d, &m, &f32,
                          &r.lr, &r.lr_int, &r.bias_mode, &r.averaged, &r.half_life, &r.beta,
                          &r.b, &r.ub, &r.max_norm, &r.n_seen, &r.n_mistakes, &r.avg_ref))
        return NULL;
    if (!(r.half_life >= 0.0) || (r.half_life > 0.0 && !r.averaged) || r.bias_mode < 0 ||
        r.bias_mode > 2 || (r.lr_int && !(fabs(r.lr) <= RULE_EXACT_INT))) {
        PyErr_SetString(PyExc_ValueError, "bad rule");
        return NULL;
    }
    static const BlockFn fns[3] = {binary_block_dense, binary_block_dense32, binary_block_sparse};
    RuleCells c;
    BlockEnd end = {-1, ROW_DONE, 0};
    if (run_block(o, n, d, m, f32, r.half_life > 0.0, fns, &r, &c, &end) == NULL)
        return NULL;
    return Py_BuildValue("(diiidddddLLL)nnnni", r.lr, r.lr_int, r.bias_mode, r.averaged,
                         r.half_life, r.beta, r.b, r.ub, r.max_norm, r.n_seen, r.n_mistakes,
                         r.avg_ref, c.n_joined_w, c.n_joined_u, end.n_factors, end.row,
                         end.why);
}

PyDoc_STRVAR(kernel_pa_binary_doc,
"kernel_pa_binary(X, indptr, slots, signs, w, u, present, joined_w, joined_u, preds, factors,\n"
"                 n, d, m, f32, rule)\n"
"    -> (rule, n_joined_w, n_joined_u, n_factors, stopped, why)\n\n"
"PassiveAggressive over a block, as kernel_binary (f32 false; u, joined_u and factors\n"
"unused): rule\n"
"(variant 0 pa 1 pa1 2 pa2, C, learned_bias, b, max_norm, n_seen, n_mistakes).");

static PyObject *py_kernel_pa_binary(PyObject *self, PyObject *args)
{
    PyObject *o[11];
    Py_ssize_t n, d, m;
    int f32;
    PaRule r;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOnnnp(idpddLL)", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &n, &d, &m, &f32,
                          &r.variant, &r.C, &r.learned_bias, &r.b, &r.max_norm, &r.n_seen,
                          &r.n_mistakes))
        return NULL;
    if (r.variant < 0 || r.variant > 2) {
        PyErr_SetString(PyExc_ValueError, "bad rule");
        return NULL;
    }
    static const BlockFn fns[3] = {pa_block_dense, NULL, pa_block_sparse};
    RuleCells c;
    BlockEnd end = {-1, ROW_DONE, 0};
    if (run_block(o, n, d, m, f32, 0, fns, &r, &c, &end) == NULL)
        return NULL;
    return Py_BuildValue("(ididdLL)nnnni", r.variant, r.C, r.learned_bias, r.b, r.max_norm,
                         r.n_seen, r.n_mistakes, c.n_joined_w, c.n_joined_u, end.n_factors,
                         end.row, end.why);
}

/* -- the multi-class blocks ------------------------------------------------------------------
 *
 * The rules are _rules.h's multi_rule_row (MulticlassPerceptron._learn and predict_one, the
 * dict API's too) and pa_multi_rule_row (MulticlassPassiveAggressive._learn); here only where
 * a block's rows and cells are: W (n_classes, m) a row of weights a class (0.0 where its dict
 * has none), U the accumulators likewise (the averaged perceptron), present (n_classes, m)
 * the bits RULE_W, RULE_U of each class's dicts, joined (2 n_classes, m) the slots that joined
 * each class's weights (row c) and accumulators (row n_classes + c), in order.
 */

#define RULE_MULTI 0    /* MultiRule, multi_rule_row */
#define RULE_PA_MULTI 1 /* PaMultiRule, pa_multi_rule_row */

static inline __attribute__((always_inline)) void
multi_block_of(int rule, int kind, const void *X, const int64_t *indptr, const int32_t *slots,
               Py_ssize_t n, Py_ssize_t d, Py_ssize_t m, const int64_t *labels, void *r,
               RuleCells *cls, double *b, double *ub, double *dot, double *udot,
               int64_t *preds, double *factors, BlockEnd *end)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        RuleRow row = {d, NULL, NULL, NULL, NULL, NULL};
        if (kind == BLOCK_SPARSE) {
            const Py_ssize_t k0 = (Py_ssize_t)indptr[i];
            row.n = (Py_ssize_t)indptr[i + 1] - k0;
            row.slots32 = slots + k0;
            row.values = (const double *)X + k0;
        }
        else
            row.values = (const double *)X + i * d;
        double factor = 0.0;
        int got = rule == RULE_PA_MULTI
                      ? pa_multi_rule_row(r, cls, b, dot, &row, labels[i], kind == BLOCK_SPARSE,
                                          &preds[i])
                      : multi_rule_row(r, cls, b, ub, dot, udot, &row, labels[i],
                                       kind == BLOCK_SPARSE, m, &preds[i], &factor);
        if (got != ROW_DONE) {
            end->row = i;
            end->why = got;
            return;
        }
        if (factor != 0.0)
            factors[end->n_factors++] = factor;
    }
}

#define MULTI_BLOCK_VARIANT(name, rule, kind)                                                 \
    static void KERNEL_CLONES name(const void *X, const int64_t *indptr, const int32_t *slots, \
                                   Py_ssize_t n, Py_ssize_t d, Py_ssize_t m,                  \
                                   const int64_t *labels, void *r, RuleCells *cls, double *b, \
                                   double *ub, double *dot, double *udot, int64_t *preds,     \
                                   double *factors, BlockEnd *end)                            \
    {                                                                                         \
        multi_block_of(rule, kind, X, indptr, slots, n, d, m, labels, r, cls, b, ub, dot,     \
                       udot, preds, factors, end);                                            \
    }
MULTI_BLOCK_VARIANT(multi_block_dense, RULE_MULTI, BLOCK_DENSE)
MULTI_BLOCK_VARIANT(multi_block_sparse, RULE_MULTI, BLOCK_SPARSE)
MULTI_BLOCK_VARIANT(pa_multi_block_dense, RULE_PA_MULTI, BLOCK_DENSE)
MULTI_BLOCK_VARIANT(pa_multi_block_sparse, RULE_PA_MULTI, BLOCK_SPARSE)

typedef void (*MultiBlockFn)(const void *, const int64_t *, const int32_t *, Py_ssize_t,
                             Py_ssize_t, Py_ssize_t, const int64_t *, void *, RuleCells *,
                             double *, double *, double *, double *, int64_t *, double *,
                             BlockEnd *);

/* A multi-class block kernel's call: o the buffers (X, indptr, slots, labels, W, U, b, ub,
 * present, joined, n_joined, preds, factors) checked and held, fns' variant for the block's
 * kind (dense, sparse) run without the GIL on rule r (classes [0, *n_active) known), the
 * joined slots' counts into n_joined, where the block stopped into *end. Py_None; NULL on
 * error. */
static PyObject *run_multi_block(PyObject *o[13], Py_ssize_t n, Py_ssize_t m,
                                 Py_ssize_t n_classes, int averaged, int forgetting,
                                 Py_ssize_t n_active, const MultiBlockFn fns[2], void *r,
                                 BlockEnd *end)
{
    if (n < 0 || m < 0 || n_active < 0 || n_classes < n_active) {
        PyErr_SetString(PyExc_ValueError, "bad n, m, n_classes or rule");
        return NULL;
    }
    int sparse = o[1] != Py_None;
    Py_buffer iv;
    Py_ssize_t nnz = n * m;
    if (sparse && (nnz = get_indptr(o[1], &iv, n)) < 0)
        return NULL;
    const Py_ssize_t cm = n_classes * m, k = n_classes, ds = (Py_ssize_t)sizeof(double);
    const BufferSpec specs[13] = {
        {o[0], 0, nnz * ds, "X"},
        {o[3], 0, n * (Py_ssize_t)sizeof(int64_t), "labels"},
        {o[4], 1, cm * ds, "W"},
        {o[5], 1, (averaged ? cm : 0) * ds, "U"},
        {o[6], 1, k * ds, "b"},
        {o[7], 1, k * ds, "ub"},
        {o[8], 1, cm, "present"},
        {o[9], 1, 2 * cm * (Py_ssize_t)sizeof(Py_ssize_t), "joined"},
        {o[10], 1, 2 * k * (Py_ssize_t)sizeof(int64_t), "n_joined"},
        {o[11], 1, n * (Py_ssize_t)sizeof(int64_t), "preds"},
        {o[12], 1, (forgetting ? n : 0) * ds, "factors"},
        {sparse ? o[2] : o[3], 0, sparse ? nnz * (Py_ssize_t)sizeof(int32_t) : 0, "slots"},
    };
    Py_buffer v[12];
    if (get_buffers(specs, v, 12) < 0) {
        if (sparse)
            PyBuffer_Release(&iv);
        return NULL;
    }
    RuleCells *cls = PyMem_New(RuleCells, k ? k : 1);
    double *scratch = PyMem_New(double, 2 * k + 2);
    if (cls == NULL || scratch == NULL || (sparse && !slots_in_range(v[11].buf, nnz, m)) ||
        !labels_in_order(v[1].buf, n, n_active, n_classes)) {
        if (cls == NULL || scratch == NULL)
            PyErr_NoMemory();
        PyMem_Free(cls);
        PyMem_Free(scratch);
        release_buffers(v, 12);
        if (sparse)
            PyBuffer_Release(&iv);
        return NULL;
    }
    /* averaged, a dense block's W and U side by side (WU[2 (c m + j)], then U's cell): one
     * cache line holds both folds' terms */
    double *W = v[2].buf, *U = v[3].buf, *WU = NULL;
    unsigned char *P = v[6].buf, *PP = NULL; /* the presence bits at the cells' stride */
    if (averaged && !sparse && cm > 0) {
        WU = PyMem_New(double, 2 * cm);
        PP = PyMem_Malloc(2 * (size_t)cm);
        if (WU == NULL || PP == NULL) {
            PyMem_Free(WU);
            PyMem_Free(PP);
            PyMem_Free(cls);
            PyMem_Free(scratch);
            release_buffers(v, 12);
            return PyErr_NoMemory();
        }
        for (Py_ssize_t j = 0; j < cm; j++) {
            WU[2 * j] = W[j];
            WU[2 * j + 1] = U[j];
            PP[2 * j] = P[j];
        }
    }
    Py_ssize_t *joined = v[7].buf;
    for (Py_ssize_t c = 0; c < k; c++) {
        double *w = WU ? WU + 2 * c * m : W + c * m;
        double *u = WU ? w + 1 : averaged ? U + c * m : w;
        RuleCells cell = {w, u, WU ? PP + 2 * c * m : P + c * m, WU ? 2 : 1, joined + c * m,
                          joined + (k + c) * m, 0, 0, 0, WU != NULL};
        cls[c] = cell;
    }
    const int64_t *indptr = sparse ? iv.buf : NULL;
    const int32_t *slots = sparse ? v[11].buf : NULL;
    MultiBlockFn fn = sparse ? fns[1] : fns[0];
    Py_BEGIN_ALLOW_THREADS
    fn(v[0].buf, indptr, slots, n, sparse ? 0 : m, m, v[1].buf, r, cls, v[4].buf, v[5].buf,
       scratch, scratch + k + 1, v[9].buf, v[10].buf, end);
    Py_END_ALLOW_THREADS
    if (WU != NULL) {
        for (Py_ssize_t j = 0; j < cm; j++) {
            W[j] = WU[2 * j];
            U[j] = WU[2 * j + 1];
            P[j] = PP[2 * j];
        }
        PyMem_Free(WU);
        PyMem_Free(PP);
    }
    int64_t *n_joined = v[8].buf;
    for (Py_ssize_t c = 0; c < k; c++) {
        n_joined[c] = cls[c].n_joined_w;
        n_joined[k + c] = cls[c].n_joined_u;
    }
    PyMem_Free(cls);
    PyMem_Free(scratch);
    release_buffers(v, 12);
    if (sparse)
        PyBuffer_Release(&iv);
    return Py_None;
}

PyDoc_STRVAR(kernel_multiclass_doc,
"kernel_multiclass(X, indptr, slots, labels, W, U, b, ub, present, joined, n_joined, preds,\n"
"                  factors, n, m, n_classes, rule)\n"
"    -> (rule, n_factors, stopped, why)\n\n"
"MulticlassPerceptron over a block (learners/_multiclass_kernel.py): dense, X float64 (n, m),\n"
"indptr and slots None; or sparse, X the float64 values of n CSR rows (indptr int64 n + 1,\n"
"slots int32 in [0, m)). labels int64 (n; the class index, -1 unlabelled, classes in order);\n"
"the cells W, U float64 (n_classes, m; U empty unless averaged), b, ub float64 (n_classes),\n"
"present uint8 (n_classes, m: bits 1 weight, 2 accumulator in the class's dicts) written in\n"
"place; joined int64 (2 n_classes, m) and n_joined int64 (2 n_classes): the slots that\n"
"joined each class's weights, then each class's accumulators, in order; preds int64 (n; -1:\n"
"no class yet); factors float64 (n): the renormalisations' factors. rule: (lr, lr_int,\n"
"bias_mode, averaged, half_life, beta, max_norm, n_seen, n_mistakes, avg_ref, n_active),\n"
"given back learned. stopped, why as kernel_binary's.");

static PyObject *py_kernel_multiclass(PyObject *self, PyObject *args)
{
    PyObject *o[13];
    Py_ssize_t n, m, n_classes;
    MultiRule r;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOnnn(dpipdddLLLn)", &o[0], &o[1], &o[2], &o[3],
                          &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &n,
                          &m, &n_classes, &r.lr, &r.lr_int, &r.bias_mode, &r.averaged,
                          &r.half_life, &r.beta, &r.max_norm, &r.n_seen, &r.n_mistakes,
                          &r.avg_ref, &r.n_active))
        return NULL;
    if (!(r.half_life >= 0.0) || (r.half_life > 0.0 && !r.averaged) || r.bias_mode < 0 ||
        r.bias_mode > 2 || (r.lr_int && !(fabs(r.lr) <= RULE_EXACT_INT))) {
        PyErr_SetString(PyExc_ValueError, "bad rule");
        return NULL;
    }
    static const MultiBlockFn fns[2] = {multi_block_dense, multi_block_sparse};
    BlockEnd end = {-1, ROW_DONE, 0};
    if (run_multi_block(o, n, m, n_classes, r.averaged, r.half_life > 0.0, r.n_active, fns, &r,
                        &end) == NULL)
        return NULL;
    return Py_BuildValue("(diiidddLLLn)nni", r.lr, r.lr_int, r.bias_mode, r.averaged,
                         r.half_life, r.beta, r.max_norm, r.n_seen, r.n_mistakes, r.avg_ref,
                         r.n_active, end.n_factors, end.row, end.why);
}

PyDoc_STRVAR(kernel_pa_multiclass_doc,
"kernel_pa_multiclass(X, indptr, slots, labels, W, U, b, ub, present, joined, n_joined,\n"
"                     preds, factors, n, m, n_classes, rule)\n"
"    -> (rule, n_factors, stopped, why)\n\n"
"MulticlassPassiveAggressive over a block (learners/_pa_kernel.py), as kernel_multiclass (U\n"
"and factors empty, ub unused): rule (variant 0 pa 1 pa1 2 pa2, C, learned_bias, max_norm,\n"
"n_seen, n_mistakes, n_active).");

static PyObject *py_kernel_pa_multiclass(PyObject *self, PyObject *args)
{
    PyObject *o[13];
    Py_ssize_t n, m, n_classes;
    PaMultiRule r;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOnnn(idpdLLn)", &o[0], &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &n, &m,
                          &n_classes, &r.variant, &r.C, &r.learned_bias, &r.max_norm,
                          &r.n_seen, &r.n_mistakes, &r.n_active))
        return NULL;
    if (r.variant < 0 || r.variant > 2) {
        PyErr_SetString(PyExc_ValueError, "bad rule");
        return NULL;
    }
    static const MultiBlockFn fns[2] = {pa_multi_block_dense, pa_multi_block_sparse};
    BlockEnd end = {-1, ROW_DONE, 0};
    if (run_multi_block(o, n, m, n_classes, 0, 0, r.n_active, fns, &r, &end) == NULL)
        return NULL;
    return Py_BuildValue("(ididLLn)nni", r.variant, r.C, r.learned_bias, r.max_norm, r.n_seen,
                         r.n_mistakes, r.n_active, end.n_factors, end.row, end.why);
}

/* -- the join's plan of a block (--join-key on the block path) ------------------------------
 *
 * The loop of stream_perceptron/join/blocks.py's plan_block (the reference, which the
 * differential test holds this to), over the pending store's own dicts and entries: an event
 * kept (a PendingEvent of the block's packed values), an outcome meeting its event, one
 * meeting an outcome that waited, duplicates counted. What is rare goes back to Python by the
 * callables given: the expiries and their next clock, the bound by count, an outcome kept
 * waiting, the keys joined long ago forgotten; an event's features when the block has more
 * than one shape.
 */

/* shapes[names][1] += by (a new [names, 0] first when by > 0; deleted at 0); *shared: the
   names tuple the shape's events share (a new reference), when not NULL. */
static int join_bump(PyObject *shapes, PyObject *names, int by, PyObject **shared)
{
    PyObject *shape = PyDict_GetItemWithError(shapes, names); /* [names, count] */
    if (shape == NULL) {
        if (PyErr_Occurred())
            return -1;
        if (by < 0) {
            PyErr_SetObject(PyExc_KeyError, names);
            return -1;
        }
        shape = Py_BuildValue("[Oi]", names, 0);
        if (shape == NULL)
            return -1;
        int bad = PyDict_SetItem(shapes, names, shape);
        Py_DECREF(shape);
        if (bad < 0)
            return -1;
    }
    if (!PyList_Check(shape) || PyList_GET_SIZE(shape) != 2) {
        PyErr_SetString(PyExc_TypeError, "a shape is [names, count]");
        return -1;
    }
    long count = PyLong_AsLong(PyList_GET_ITEM(shape, 1));
    if (count == -1 && PyErr_Occurred())
        return -1;
    count += by;
    if (count == 0)
        return PyDict_DelItem(shapes, names);
    PyObject *c = PyLong_FromLong(count);
    if (c == NULL)
        return -1;
    if (shared != NULL) {
        *shared = PyList_GET_ITEM(shape, 0);
        Py_INCREF(*shared);
    }
    return PyList_SetItem(shape, 1, c); /* steals c */
}

/* joined[key] = now, at the end (moved there when it was in). */
static int join_remember(PyObject *joined, PyObject *key, PyObject *now)
{
    int in = PyDict_Contains(joined, key);
    if (in < 0 || (in && PyObject_DelItem(joined, key) < 0))
        return -1;
    return PyObject_SetItem(joined, key, now);
}

/* Append (k, gone) to drops when gone is a non-empty list; steals gone. */
static int join_drops(PyObject *drops, Py_ssize_t k, PyObject *gone)
{
    if (gone == NULL)
        return -1;
    int status = 0;
    if (PyObject_IsTrue(gone)) {
        PyObject *item = Py_BuildValue("(nO)", k, gone);
        status = item == NULL ? -1 : PyList_Append(drops, item);
        Py_XDECREF(item);
    }
    Py_DECREF(gone);
    return status;
}

static int join_due(PyObject *next_due, double *due)
{
    PyObject *d = PyObject_CallNoArgs(next_due);
    if (d == NULL)
        return -1;
    *due = PyFloat_AsDouble(d);
    Py_DECREF(d);
    return *due == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* A bytearray written at its end, grown by doubling (its size set to len at the end). */
typedef struct {
    PyObject *a;
    Py_ssize_t len, cap;
} JoinOut;

static char *join_room(JoinOut *o, Py_ssize_t more)
{
    if (o->len + more > o->cap) {
        Py_ssize_t cap = o->cap > 0 ? o->cap : 1 << 16;
        while (cap < o->len + more)
            cap *= 2;
        if (PyByteArray_Resize(o->a, cap) < 0)
            return NULL;
        o->cap = cap;
    }
    char *at = PyByteArray_AS_STRING(o->a) + o->len;
    o->len += more;
    return at;
}

/* The kernel's rows, in the plan's order: row i of the block, or a waiting event's features. */
typedef struct {
    const int32_t *slots;   /* the block's */
    PyObject *slots_of;     /* names -> their kernel slots (int32 bytes), for an event's shape */
    PyObject *cache;        /* names -> slots_of(names), this block's */
    PyObject *last_names, *last_slots; /* the last shape's (names held; slots: the cache's) */
    JoinOut indptr, out_slots, out_values;
    int64_t nnz;
} JoinKernel;

static int join_row_end(JoinKernel *kr, Py_ssize_t m)
{
    kr->nnz += m;
    char *at = join_room(&kr->indptr, sizeof(int64_t));
    if (at == NULL)
        return -1;
    memcpy(at, &kr->nnz, sizeof(int64_t));
    return 0;
}

static int join_block_row(JoinKernel *kr, const int64_t *indptr, const char *values,
                          Py_ssize_t i)
{
    Py_ssize_t m = indptr[i + 1] - indptr[i];
    char *s = join_room(&kr->out_slots, 4 * m), *v = s ? join_room(&kr->out_values, 8 * m) : NULL;
    if (v == NULL)
        return -1;
    memcpy(s, kr->slots + indptr[i], 4 * m);
    memcpy(v, values + 8 * indptr[i], 8 * m);
    return join_row_end(kr, m);
}

static int join_event_row(JoinKernel *kr, PyObject *event)
{
    PyObject *names = PyTuple_GET_ITEM(event, 3), *packed = PyTuple_GET_ITEM(event, 4);
    if (!PyTuple_Check(names) || !PyBytes_Check(packed) ||
        PyBytes_GET_SIZE(packed) != 8 * PyTuple_GET_SIZE(names)) {
        PyErr_SetString(PyExc_TypeError, "join_plan: an event's names and packed values");
        return -1;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(names);
    /* the events of a shape share its names: the last shape's slots at once */
    PyObject *slots = names == kr->last_names ? kr->last_slots
                                              : PyDict_GetItemWithError(kr->cache, names);
    if (slots == NULL) {
        if (PyErr_Occurred())
            return -1;
        slots = PyObject_CallOneArg(kr->slots_of, names);
        if (slots == NULL)
            return -1;
        int bad = !PyBytes_Check(slots) || PyBytes_GET_SIZE(slots) != 4 * m;
        if (bad)
            PyErr_SetString(PyExc_TypeError, "join_plan: slots_of gives int32 bytes a name");
        if (bad || PyDict_SetItem(kr->cache, names, slots) < 0) {
            Py_DECREF(slots);
            return -1;
        }
        Py_DECREF(slots); /* the cache holds it */
    }
    if (names != kr->last_names) { /* held, so no other tuple takes its address */
        Py_INCREF(names);
        Py_XSETREF(kr->last_names, names);
    }
    kr->last_slots = slots;
    char *s = join_room(&kr->out_slots, 4 * m), *v = s ? join_room(&kr->out_values, 8 * m) : NULL;
    if (v == NULL)
        return -1;
    memcpy(s, PyBytes_AS_STRING(slots), 4 * m);
    memcpy(v, PyBytes_AS_STRING(packed), 8 * m);
    return join_row_end(kr, m);
}

PyDoc_STRVAR(join_plan_doc,
"join_plan(store, keys, labels, indptr, values, shape, features, clock, origin, offsets,\n"
"          later, event_type, own, wait, most, calls, out) -> counts\n\n"
"plan_block's loop (stream_perceptron/join/blocks.py). store: (events, outcomes, joined,\n"
"shapes); indptr int64 (n + 1) and values float64: the block's rows; shape: the names of\n"
"every row with features (None: features(i) gives (names, packed values)); calls: (expire,\n"
"next_due, overflow, keep_outcome(i, key, label, now), forget(oldest)); out: (rows, pending,\n"
"labels, served, drops), filled. counts: (events, outcomes, duplicate events, duplicate\n"
"outcomes, outcomes waiting or duplicate, events waiting or duplicate). kernel, optional:\n"
"(slots, slots_of, indptr, kernel slots, kernel values), the block's slots (int32) and three\n"
"bytearrays the kernel's rows are written into, in the order of rows (a block row's\n"
"features, or a joined outcome's event's, its names' slots by slots_of(names), int32 bytes).");

static PyObject *py_join_plan(PyObject *self, PyObject *args)
{
    PyObject *events, *outcomes, *joined, *shapes, *keys, *labels, *o_indptr, *o_values, *shape,
        *features, *origin, *offsets, *later, *event_type, *own;
    PyObject *expire, *next_due, *overflow, *keep_outcome, *forget;
    PyObject *rows, *pending, *labels_of, *served, *drops;
    PyObject *kernel = Py_None;
    long long clock, wait, most;
    if (!PyArg_ParseTuple(args, "(OOOO)O!O!OOOOLOOOOOLL(OOOOO)(O!O!O!O!O!)|O", &events,
                          &outcomes, &joined, &shapes, &PyList_Type, &keys, &PyList_Type,
                          &labels, &o_indptr, &o_values, &shape, &features, &clock, &origin,
                          &offsets, &later, &event_type, &own, &wait, &most, &expire,
                          &next_due, &overflow, &keep_outcome, &forget, &PyList_Type, &rows,
                          &PyDict_Type, &pending, &PyDict_Type, &labels_of, &PyList_Type,
                          &served, &PyList_Type, &drops, &kernel))
        return NULL;
    JoinKernel kr = {NULL, NULL, NULL, NULL, NULL, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}, 0};
    Py_buffer sv = {0};
    PyObject *o_slots = NULL;
    if (kernel != Py_None &&
        (!PyTuple_Check(kernel) || PyTuple_GET_SIZE(kernel) != 5 ||
         !PyByteArray_Check(PyTuple_GET_ITEM(kernel, 2)) ||
         !PyByteArray_Check(PyTuple_GET_ITEM(kernel, 3)) ||
         !PyByteArray_Check(PyTuple_GET_ITEM(kernel, 4)))) {
        PyErr_SetString(PyExc_TypeError, "join_plan: kernel is (slots, slots_of, 3 bytearrays)");
        return NULL;
    }
    if (kernel != Py_None) {
        o_slots = PyTuple_GET_ITEM(kernel, 0);
        kr.slots_of = PyTuple_GET_ITEM(kernel, 1);
        kr.indptr.a = PyTuple_GET_ITEM(kernel, 2);
        kr.out_slots.a = PyTuple_GET_ITEM(kernel, 3);
        kr.out_values.a = PyTuple_GET_ITEM(kernel, 4);
    }
    if (!PyDict_Check(events) || !PyDict_Check(outcomes) || !PyDict_Check(joined) ||
        !PyDict_Check(shapes) || !PyType_Check(event_type) ||
        !PyType_IsSubtype((PyTypeObject *)event_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "join_plan: the store is four dicts");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(labels) != n) {
        PyErr_SetString(PyExc_ValueError, "join_plan: as many labels as keys");
        return NULL;
    }
    Py_buffer iv, vv;
    if (get_buffer(o_indptr, &iv, 0, (n + 1) * (Py_ssize_t)sizeof(int64_t), "indptr") < 0)
        return NULL;
    const int64_t *indptr = iv.buf;
    if (get_buffer(o_values, &vv, 0, indptr[n] * (Py_ssize_t)sizeof(double), "values") < 0) {
        PyBuffer_Release(&iv);
        return NULL;
    }
    const char *values = vv.buf;
    if (o_slots != NULL) {
        if (get_buffer(o_slots, &sv, 0, indptr[n] * (Py_ssize_t)sizeof(int32_t), "slots") < 0) {
            PyBuffer_Release(&iv);
            PyBuffer_Release(&vv);
            return NULL;
        }
        kr.slots = sv.buf;
        kr.cache = PyDict_New();
        int64_t start = 0;
        char *at = kr.cache == NULL ? NULL : join_room(&kr.indptr, sizeof(int64_t));
        if (at == NULL) {
            Py_XDECREF(kr.cache);
            PyBuffer_Release(&iv);
            PyBuffer_Release(&vv);
            PyBuffer_Release(&sv);
            return NULL;
        }
        memcpy(at, &start, sizeof(int64_t));
    }
    PyObject *empty = PyTuple_New(0), *zero = PyLong_FromLong(0);
    long long n_events = 0, n_outcomes = 0, dup_events = 0, dup_outcomes = 0, waiting = 0,
              waiting_rows = 0;
    double due;
    PyObject *now_o = NULL, *k_o = NULL;
    int failed = empty == NULL || zero == NULL || join_due(next_due, &due) < 0;
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        failed = 1;
        long long now = clock + i;
        Py_CLEAR(now_o);
        Py_CLEAR(k_o);
        if ((double)now >= due) {
            if (join_drops(drops, PyList_GET_SIZE(rows), PyObject_CallFunction(expire, "L", now))
                    < 0 || join_due(next_due, &due) < 0)
                break;
        }
        PyObject *key = PyList_GET_ITEM(keys, i), *y = PyList_GET_ITEM(labels, i);
        int has_x = indptr[i + 1] > indptr[i];
        Py_ssize_t k = PyList_GET_SIZE(rows);
        now_o = PyLong_FromLongLong(now);
        k_o = PyLong_FromSsize_t(k);
        PyObject *i_o = PyLong_FromSsize_t(i);
        if (now_o == NULL || k_o == NULL || i_o == NULL) {
            Py_XDECREF(i_o);
            break;
        }
        int appended = PyList_Append(rows, i_o);
        Py_DECREF(i_o);
        if (appended < 0)
            break;
        /* a row of its own: a record without a key, with both, an event */
        if (kr.cache != NULL && (key == Py_None || y == Py_None || has_x) &&
            join_block_row(&kr, indptr, values, i) < 0)
            break;
        if (key == Py_None || (y != Py_None && has_x)) {
            failed = 0;
            continue;
        }
        int kept = 0;
        if (y == Py_None) { /* an event */
            n_events++;
            PyObject *outcome = PyDict_GetItemWithError(outcomes, key);
            if (outcome == NULL && PyErr_Occurred())
                break;
            if (outcome != NULL) { /* its outcome waited: joined, served its own prediction */
                PyObject *label = PySequence_GetItem(outcome, 3);
                if (label == NULL)
                    break;
                int bad = PyObject_DelItem(outcomes, key) < 0 ||
                          join_remember(joined, key, now_o) < 0 ||
                          PyDict_SetItem(labels_of, k_o, label) < 0;
                Py_DECREF(label);
                PyObject *pair = bad ? NULL : PyTuple_Pack(3, k_o, own, zero);
                if (pair != NULL)
                    PyObject_GC_UnTrack(pair); /* ints and a Later: in no cycle */
                if (pair == NULL || PyList_Append(served, pair) < 0) {
                    Py_XDECREF(pair);
                    break;
                }
                Py_DECREF(pair);
                failed = 0;
                continue;
            }
            waiting_rows++;
            int in = PyDict_Contains(events, key);
            if (in < 0)
                break;
            if (in) {
                dup_events++;
                failed = 0;
                continue;
            }
            PyObject *names, *packed;
            if (shape != Py_None) {
                names = has_x ? shape : empty;
                Py_INCREF(names);
                packed = PyBytes_FromStringAndSize(values + 8 * indptr[i],
                                                   8 * (indptr[i + 1] - indptr[i]));
            }
            else {
                PyObject *got = PyObject_CallFunction(features, "n", i);
                if (got == NULL)
                    break;
                if (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
                    Py_DECREF(got);
                    PyErr_SetString(PyExc_TypeError, "features(i) gives (names, values)");
                    break;
                }
                names = PyTuple_GET_ITEM(got, 0);
                packed = PyTuple_GET_ITEM(got, 1);
                Py_INCREF(names);
                Py_INCREF(packed);
                Py_DECREF(got);
            }
            PyObject *shared = NULL, *offset = PySequence_GetItem(offsets, i);
            int bad = packed == NULL || offset == NULL || join_bump(shapes, names, 1, &shared) < 0;
            Py_DECREF(names);
            PyObject *event = bad ? NULL : ((PyTypeObject *)event_type)->tp_alloc(
                                               (PyTypeObject *)event_type, 7);
            if (event == NULL) {
                Py_XDECREF(packed);
                Py_XDECREF(offset);
                Py_XDECREF(shared);
                break;
            }
            Py_INCREF(now_o);
            Py_INCREF(origin);
            Py_INCREF(later);
            PyTuple_SET_ITEM(event, 0, now_o);
            PyTuple_SET_ITEM(event, 1, origin);
            PyTuple_SET_ITEM(event, 2, offset);
            PyTuple_SET_ITEM(event, 3, shared);
            PyTuple_SET_ITEM(event, 4, packed);
            PyTuple_SET_ITEM(event, 5, later);
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(event, 6, Py_None); /* no timestamp: the block path's lines */
            /* no cycle can hold an event (nothing it holds refers back to events): out of the
               collector's lists, so collections do not walk the thousands waiting */
            PyObject_GC_UnTrack(event);
            bad = PyObject_SetItem(events, key, event) < 0;
            Py_DECREF(event);
            in = bad ? -1 : PyDict_Contains(joined, key);
            if (in < 0 || (in && PyObject_DelItem(joined, key) < 0))
                break;
            if (due > (double)(now + wait))
                due = (double)(now + wait + 1);
            kept = 1;
        }
        else { /* an outcome */
            n_outcomes++;
            PyObject *event = PyDict_GetItemWithError(events, key);
            if (event == NULL && PyErr_Occurred())
                break;
            if (event != NULL) { /* its event waited: learned with its features */
                Py_INCREF(event);
                PyObject *arrival = PySequence_GetItem(event, 0);
                PyObject *names = PySequence_GetItem(event, 3);
                long long at = arrival == NULL ? -1 : PyLong_AsLongLong(arrival);
                PyObject *delay = at == -1 && PyErr_Occurred() ? NULL
                                                               : PyLong_FromLongLong(now - at);
                PyObject *pair = delay == NULL ? NULL : PyTuple_Pack(3, k_o, event, delay);
                if (pair != NULL)
                    PyObject_GC_UnTrack(pair); /* ints and an event: in no cycle */
                int bad = pair == NULL || names == NULL ||
                          (kr.cache != NULL && join_event_row(&kr, event) < 0) ||
                          PyObject_DelItem(events, key) < 0 ||
                          join_bump(shapes, names, -1, NULL) < 0 ||
                          join_remember(joined, key, now_o) < 0 ||
                          PyList_Append(served, pair) < 0 ||
                          PyDict_SetItem(pending, k_o, event) < 0;
                Py_XDECREF(arrival);
                Py_XDECREF(names);
                Py_XDECREF(delay);
                Py_XDECREF(pair);
                Py_DECREF(event);
                if (bad)
                    break;
                failed = 0;
                continue;
            }
            /* no row: the outcome waits (or is a duplicate) */
            if (PySequence_DelItem(rows, k) < 0)
                break;
            waiting++;
            PyObject *done = PyObject_CallFunction(forget, "L", now - wait);
            if (done == NULL)
                break;
            Py_DECREF(done);
            int in = PyDict_Contains(outcomes, key);
            if (in == 0)
                in = PyDict_Contains(joined, key);
            if (in < 0)
                break;
            if (in) {
                dup_outcomes++;
                failed = 0;
                continue;
            }
            done = PyObject_CallFunction(keep_outcome, "nOOL", i, key, y, now);
            if (done == NULL)
                break;
            Py_DECREF(done);
            if (due > (double)(now + wait))
                due = (double)(now + wait + 1);
            kept = 1;
        }
        if (kept && (PyDict_GET_SIZE(events) + PyDict_GET_SIZE(outcomes) > most ||
                     PyDict_GET_SIZE(joined) > most)) {
            if (join_drops(drops, PyList_GET_SIZE(rows), PyObject_CallNoArgs(overflow)) < 0)
                break;
        }
        failed = 0;
    }
    Py_XDECREF(now_o);
    Py_XDECREF(k_o);
    Py_XDECREF(empty);
    Py_XDECREF(zero);
    PyBuffer_Release(&iv);
    PyBuffer_Release(&vv);
    if (kr.cache != NULL) {
        Py_XDECREF(kr.last_names);
        Py_DECREF(kr.cache);
        PyBuffer_Release(&sv);
        if (!failed && (PyByteArray_Resize(kr.indptr.a, kr.indptr.len) < 0 ||
                        PyByteArray_Resize(kr.out_slots.a, kr.out_slots.len) < 0 ||
                        PyByteArray_Resize(kr.out_values.a, kr.out_values.len) < 0))
            failed = 1;
    }
    if (failed)
        return NULL;
    return Py_BuildValue("LLLLLL", n_events, n_outcomes, dup_events, dup_outcomes, waiting,
                         waiting_rows);
}

PyDoc_STRVAR(join_served_doc,
"join_served(served, predictions, labels, refused, own, later_type) -> (mistakes, delays)\n\n"
"The joined pairs of a plan (served: (kernel row k, event or own, delay) each) against their\n"
"served predictions: own, predictions[k]; an event's, its prediction, or, a Later p, p.block\n"
"[event's arrival - p.clock]; a pair whose row was refused (predictions[k] is refused) left\n"
"out. mistakes: how many differ from labels[k]; delays: the pairs' delays, in order.");

static PyObject *py_join_served(PyObject *self, PyObject *args)
{
    PyObject *served, *predictions, *labels, *refused, *own, *later_type;
    if (!PyArg_ParseTuple(args, "O!O!O!OOO", &PyList_Type, &served, &PyList_Type, &predictions,
                          &PyList_Type, &labels, &refused, &own, &later_type))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(served), rows = PyList_GET_SIZE(predictions);
    if (PyList_GET_SIZE(labels) != rows) {
        PyErr_SetString(PyExc_ValueError, "join_served: a label a prediction");
        return NULL;
    }
    PyObject *delays = PyList_New(0);
    if (delays == NULL)
        return NULL;
    long long mistakes = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *pair = PyList_GET_ITEM(served, j);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 3) {
            PyErr_SetString(PyExc_TypeError, "join_served: (k, event, delay) pairs");
            goto fail;
        }
        Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
        if (k == -1 && PyErr_Occurred())
            goto fail;
        if (k < 0 || k >= rows) {
            PyErr_SetString(PyExc_IndexError, "join_served: a row out of the block");
            goto fail;
        }
        PyObject *made = PyList_GET_ITEM(predictions, k), *event = PyTuple_GET_ITEM(pair, 1);
        if (made == refused)
            continue;
        Py_INCREF(made);
        if (event != own) {
            Py_DECREF(made);
            made = PySequence_GetItem(event, 5);
            if (made == NULL)
                goto fail;
            if ((PyObject *)Py_TYPE(made) == later_type) {
                static PyObject *s_block = NULL, *s_clock = NULL;
                if (s_block == NULL && (s_block = PyUnicode_InternFromString("block")) == NULL)
                    goto fail;
                if (s_clock == NULL && (s_clock = PyUnicode_InternFromString("clock")) == NULL)
                    goto fail;
                PyObject *block = PyObject_GetAttr(made, s_block);
                PyObject *clock = PyObject_GetAttr(made, s_clock);
                PyObject *arrival = PySequence_GetItem(event, 0);
                Py_DECREF(made);
                made = NULL;
                long long a = arrival == NULL ? -1 : PyLong_AsLongLong(arrival);
                long long c = clock == NULL || (a == -1 && PyErr_Occurred())
                                  ? -1 : PyLong_AsLongLong(clock);
                if (block != NULL && !PyErr_Occurred()) {
                    if (PyList_Check(block) && a - c >= 0 && a - c < PyList_GET_SIZE(block)) {
                        made = PyList_GET_ITEM(block, a - c);
                        Py_INCREF(made);
                    }
                    else {
                        PyObject *at = PyLong_FromLongLong(a - c);
                        made = at == NULL ? NULL : PyObject_GetItem(block, at);
                        Py_XDECREF(at);
                    }
                }
                Py_XDECREF(block);
                Py_XDECREF(clock);
                Py_XDECREF(arrival);
                if (made == NULL)
                    goto fail;
            }
        }
        /* made != label, as Python's != (no shortcut for the same object) */
        PyObject *ne = PyObject_RichCompare(made, PyList_GET_ITEM(labels, k), Py_NE);
        Py_DECREF(made);
        int differs = ne == NULL ? -1 : PyObject_IsTrue(ne);
        Py_XDECREF(ne);
        if (differs < 0 || PyList_Append(delays, PyTuple_GET_ITEM(pair, 2)) < 0)
            goto fail;
        mistakes += differs;
    }
    return Py_BuildValue("LN", mistakes, delays);
fail:
    Py_DECREF(delays);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_csv", py_scan_csv, METH_VARARGS, scan_csv_doc},
    {"scan_jsonl", py_scan_jsonl, METH_VARARGS, scan_jsonl_doc},
    {"intern_lines", py_intern_lines, METH_VARARGS, intern_lines_doc},
    {"count_lines", py_count_lines, METH_VARARGS, count_lines_doc},
    {"parse_decimal", py_parse_decimal, METH_O, parse_decimal_doc},
    {"set_tables", py_set_tables, METH_VARARGS, set_tables_doc},
    {"empty", py_empty, METH_O, empty_doc},
    {"set_malloc_thresholds", py_set_malloc_thresholds, METH_VARARGS, set_malloc_thresholds_doc},
    {"take", py_take, METH_VARARGS, take_doc},
    {"mistakes", py_mistakes, METH_VARARGS, mistakes_doc},
    {"kernel_binary", py_kernel_binary, METH_VARARGS, kernel_binary_doc},
    {"kernel_multiclass", py_kernel_multiclass, METH_VARARGS, kernel_multiclass_doc},
    {"kernel_pa_binary", py_kernel_pa_binary, METH_VARARGS, kernel_pa_binary_doc},
    {"kernel_pa_multiclass", py_kernel_pa_multiclass, METH_VARARGS, kernel_pa_multiclass_doc},
    {"scan_sparse", py_scan_sparse, METH_VARARGS, scan_sparse_doc},
    {"scan_sparse_csv", py_scan_sparse_csv, METH_VARARGS, scan_sparse_csv_doc},
    {"remap_slots", py_remap_slots, METH_VARARGS, remap_slots_doc},
    {"shift_indptr", py_shift_indptr, METH_VARARGS, shift_indptr_doc},
    {"join_plan", py_join_plan, METH_VARARGS, join_plan_doc},
    {"join_served", py_join_served, METH_VARARGS, join_served_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dense",
    "The dense fast path in C: block scanners and exact perceptron kernels (see learners/_*_kernel.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__dense(void) { return PyModule_Create(&module); }
