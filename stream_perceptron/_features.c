/* Feature preprocessing in C: online standardisation of a dense block, MurmurHash3, and random
 * Fourier features (rff_block, below).
 *
 * scale_block does, row by row and column by column, the floating-point operations of the
 * readable reference stream_perceptron/learners/scaling.py (Standardizer.update and .value,
 * River's StandardScaler update): n += 1; mean += (v - old) / n;
 * var += ((v - old) * (v - mean) - var) / n; then (v - mean) / sqrt(var). Compiled with
 * -ffp-contract=off (no fused multiply-add), so the two give the same bits (tests/fast).
 * murmur3_32 is MurmurHash3_x86_32 (Austin Appleby's public-domain reference), the hash of
 * Vowpal Wabbit and scikit-learn's FeatureHasher.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The largest |value| the statistics count: with every counted value within it, the mean stays
 * within it, the variance under its square and (v - old) * (v - mean) under 4 * its square =
 * 2^1022, so no later update can overflow them (SCALE_LIMIT in scaling.py). */
#define SCALE_LIMIT 0x1p510

/* The value of v for a feature whose statistics (after counting v) are n, mean, var: what
 * Standardizer.value computes. */
static inline double standardized(double v, double n, double mean, double var)
{
    if (var > 0.0)
        return (v - mean) / sqrt(var);
    if (n >= 2.0)
        return v; /* constant so far (an indicator's 1.0): passed through */
    return 0.0;   /* seen once: nothing to standardise against */
}

/* One value standardised into *out with its feature's statistics counting it; the statistics
 * updated when `update` (a learned row). 0 when a statistic or the value would not be finite, or
 * the value is past SCALE_LIMIT (nothing written then). */
static inline int scale_value(double value, double *out, double *n, double *mean, double *var,
                              int update)
{
    double nj = *n + 1.0;
    double old = *mean;
    double m = old + (value - old) / nj;
    double s = *var + ((value - old) * (value - m) - *var) / nj;
    double r = standardized(value, nj, m, s);
    if (!(fabs(value) <= SCALE_LIMIT && isfinite(m) && isfinite(s) && isfinite(r)))
        return 0;
    *out = r;
    if (update) {
        *n = nj;
        *mean = m;
        *var = s;
    }
    return 1;
}

static int get(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t bytes, const char *what)
{
    if (PyObject_GetBuffer(obj, view, writable ? (PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
                                               : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len < bytes) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s is too small", what);
        return -1;
    }
    return 0;
}

/* scale_block(X, out, learn, n, mean, var, rows, cols) -> first bad row or -1.
 * X, out: float64 rows x cols (C order); learn: uint8 per row (1: the row's values update the
 * statistics; 0: scaled with the statistics as they would be, left unchanged); n, mean, var:
 * float64 per column, updated in place. Returns the first row whose statistics or values
 * would not be finite (then n, mean, var hold garbage: the caller drops them). */
static PyObject *scale_block(PyObject *self, PyObject *args)
{
    PyObject *oX, *oout, *olearn, *on, *omean, *ovar;
    Py_ssize_t rows, cols;
    if (!PyArg_ParseTuple(args, "OOOOOOnn", &oX, &oout, &olearn, &on, &omean, &ovar, &rows, &cols))
        return NULL;
    if (rows < 0 || cols < 0)
        return PyErr_Format(PyExc_ValueError, "negative size");
    Py_buffer v[6];
    PyObject *objs[6] = {oX, oout, olearn, on, omean, ovar};
    const Py_ssize_t sizes[6] = {
        rows * cols * 8, rows * cols * 8, rows, cols * 8, cols * 8, cols * 8,
    };
    const char *names[6] = {"X", "out", "learn", "n", "mean", "var"};
    int got = 0;
    for (; got < 6; got++)
        if (get(objs[got], &v[got], got != 0 && got != 2, sizes[got], names[got]) < 0)
            break;
    if (got < 6) {
        for (int i = 0; i < got; i++)
            PyBuffer_Release(&v[i]);
        return NULL;
    }
    const double *X = v[0].buf;
    double *out = v[1].buf;
    const uint8_t *learn = v[2].buf;
    double *n = v[3].buf, *mean = v[4].buf, *var = v[5].buf;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows && bad < 0; i++) {
        const double *x = X + i * cols;
        double *o = out + i * cols;
        int update = learn[i] != 0;
        for (Py_ssize_t j = 0; j < cols; j++) {
            if (!scale_value(x[j], &o[j], &n[j], &mean[j], &var[j], update)) {
                bad = i;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 6; i++)
        PyBuffer_Release(&v[i]);
    return PyLong_FromSsize_t(bad);
}

/* scale_dict(x, n_of, mean_of, var_of, strict) -> (out, pending) | False | None: what
 * Standardizer.transform computes for the dict x, in C. None: a value that is not exactly a
 * float or an int that fits one, or a statistic of an unexpected type (the caller runs the
 * Python reference); False: strict and a statistic or a value not finite (the caller refuses
 * the example). pending: [(k, n, mean, var), ...] in x's order. */
static PyObject *scale_dict(PyObject *self, PyObject *args)
{
    PyObject *x, *n_of, *mean_of, *var_of;
    int strict;
    if (!PyArg_ParseTuple(args, "O!O!O!O!p", &PyDict_Type, &x, &PyDict_Type, &n_of, &PyDict_Type,
                          &mean_of, &PyDict_Type, &var_of, &strict))
        return NULL;
    PyObject *out = PyDict_New();
    PyObject *pending = PyList_New(0);
    if (out == NULL || pending == NULL)
        goto error;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(x, &pos, &k, &v)) {
        double value;
        if (PyFloat_CheckExact(v)) {
            value = PyFloat_AS_DOUBLE(v);
        } else if (PyLong_CheckExact(v)) {
            value = PyLong_AsDouble(v);
            if (value == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                goto fallback;
            }
        } else {
            goto fallback;
        }
        long long n = 0;
        double old = 0.0, var = 0.0;
        PyObject *got = PyDict_GetItemWithError(n_of, k);
        if (got != NULL) {
            if (!PyLong_CheckExact(got))
                goto fallback;
            n = PyLong_AsLongLong(got);
            if (n == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto fallback;
            }
        } else if (PyErr_Occurred()) {
            goto error;
        }
        got = PyDict_GetItemWithError(mean_of, k);
        if (got != NULL) {
            if (!PyFloat_CheckExact(got))
                goto fallback;
            old = PyFloat_AS_DOUBLE(got);
        } else if (PyErr_Occurred()) {
            goto error;
        }
        got = PyDict_GetItemWithError(var_of, k);
        if (got != NULL) {
            if (!PyFloat_CheckExact(got))
                goto fallback;
            var = PyFloat_AS_DOUBLE(got);
        } else if (PyErr_Occurred()) {
            goto error;
        }
        n += 1;
        if (n > ((long long)1 << 53))
            goto fallback;
        double nd = (double)n;
        double mean = old + (value - old) / nd;
        var = var + ((value - old) * (value - mean) - var) / nd;
        PyObject *r;
        double scaled;
        if (var > 0.0) {
            scaled = (value - mean) / sqrt(var);
            r = PyFloat_FromDouble(scaled);
        } else if (n >= 2) {
            scaled = value;
            r = Py_NewRef(v); /* passed through: the very object, as the reference */
        } else {
            scaled = 0.0;
            r = PyFloat_FromDouble(0.0);
        }
        if (r == NULL)
            goto error;
        if (strict && !(fabs(value) <= SCALE_LIMIT && isfinite(mean) && isfinite(var) &&
                        isfinite(scaled))) {
            Py_DECREF(r);
            Py_DECREF(out);
            Py_DECREF(pending);
            Py_RETURN_FALSE;
        }
        int failed = PyDict_SetItem(out, k, r);
        Py_DECREF(r);
        if (failed)
            goto error;
        PyObject *entry = Py_BuildValue("(OLdd)", k, n, mean, var);
        if (entry == NULL)
            goto error;
        failed = PyList_Append(pending, entry);
        Py_DECREF(entry);
        if (failed)
            goto error;
    }
    PyObject *result = PyTuple_Pack(2, out, pending);
    Py_DECREF(out);
    Py_DECREF(pending);
    return result;
fallback:
    Py_XDECREF(out);
    Py_XDECREF(pending);
    Py_RETURN_NONE;
error:
    Py_XDECREF(out);
    Py_XDECREF(pending);
    return NULL;
}

/* commit_dict(pending, n_of, mean_of, var_of): Standardizer.commit in C, for what scale_dict
 * returned: n_of[k], mean_of[k], var_of[k] = n, mean, var for each (k, n, mean, var). */
static PyObject *commit_dict(PyObject *self, PyObject *args)
{
    PyObject *pending, *n_of, *mean_of, *var_of;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &pending, &PyDict_Type, &n_of,
                          &PyDict_Type, &mean_of, &PyDict_Type, &var_of))
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(pending);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry = PyList_GET_ITEM(pending, i);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4)
            return PyErr_Format(PyExc_TypeError, "pending entries are (k, n, mean, var)");
        PyObject *k = PyTuple_GET_ITEM(entry, 0);
        if (PyDict_SetItem(n_of, k, PyTuple_GET_ITEM(entry, 1)) < 0 ||
            PyDict_SetItem(mean_of, k, PyTuple_GET_ITEM(entry, 2)) < 0 ||
            PyDict_SetItem(var_of, k, PyTuple_GET_ITEM(entry, 3)) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static uint32_t murmur3(const uint8_t *data, Py_ssize_t len, uint32_t seed)
{
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h = seed;
    Py_ssize_t blocks = len / 4;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        uint32_t k;
        memcpy(&k, data + 4 * i, 4); /* little-endian hosts, as the reference */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        k = __builtin_bswap32(k);
#endif
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64u;
    }
    const uint8_t *tail = data + 4 * blocks;
    uint32_t k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2:
        k ^= (uint32_t)tail[1] << 8; /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* murmur3_32(data: bytes, seed: int) -> int in [0, 2**32). */
static PyObject *murmur3_32(PyObject *self, PyObject *args)
{
    Py_buffer data;
    unsigned long seed;
    if (!PyArg_ParseTuple(args, "y*k", &data, &seed))
        return NULL;
    uint32_t h = murmur3(data.buf, data.len, (uint32_t)seed);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(h);
}

/* rff_block(X, out, W, idx, b, rows, cols, terms, D, scale) -> first bad row or -1.
 * Random Fourier features of a dense block, what the readable reference
 * stream_perceptron/learners/fourier.py (RandomFourierFeatures.project_reference) computes:
 * for each row i and component d, p = 0.0; p += X[i, idx[k]] * W[k, d] for k = 0 .. terms-1
 * (a plain left fold in the map's order); out[i, d] = cos(p + b[d]) * scale.
 * X: float64 rows x cols; out: float64 rows x D; W: float64 terms x D (row k: the column of
 * the map's matrix of the k-th input in summation order); idx: int64 per term, the column of X;
 * b: float64 per component. Returns the first row with a projection that is not finite. */
static PyObject *rff_block(PyObject *self, PyObject *args)
{
    PyObject *oX, *oout, *oW, *oidx, *ob;
    Py_ssize_t rows, cols, terms, D;
    double scale;
    if (!PyArg_ParseTuple(args, "OOOOOnnnnd", &oX, &oout, &oW, &oidx, &ob, &rows, &cols, &terms,
                          &D, &scale))
        return NULL;
    if (rows < 0 || cols < 0 || terms < 0 || D < 0)
        return PyErr_Format(PyExc_ValueError, "negative size");
    Py_buffer v[5];
    PyObject *objs[5] = {oX, oout, oW, oidx, ob};
    const Py_ssize_t sizes[5] = {rows * cols * 8, rows * D * 8, terms * D * 8, terms * 8, D * 8};
    const char *names[5] = {"X", "out", "W", "idx", "b"};
    int got = 0;
    for (; got < 5; got++)
        if (get(objs[got], &v[got], got == 1, sizes[got], names[got]) < 0)
            break;
    if (got < 5) {
        for (int i = 0; i < got; i++)
            PyBuffer_Release(&v[i]);
        return NULL;
    }
    const double *X = v[0].buf, *W = v[2].buf, *b = v[4].buf;
    double *out = v[1].buf;
    const int64_t *idx = v[3].buf;
    for (Py_ssize_t k = 0; k < terms; k++)
        if (idx[k] < 0 || idx[k] >= cols) {
            for (int i = 0; i < 5; i++)
                PyBuffer_Release(&v[i]);
            return PyErr_Format(PyExc_ValueError, "idx out of range");
        }
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows && bad < 0; i++) {
        const double *x = X + i * cols;
        double *o = out + i * D;
        for (Py_ssize_t d = 0; d < D; d++) {
            double p = 0.0;
            for (Py_ssize_t k = 0; k < terms; k++)
                p += x[idx[k]] * W[k * D + d];
            if (!isfinite(p)) {
                bad = i;
                break;
            }
            o[d] = cos(p + b[d]) * scale;
        }
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 5; i++)
        PyBuffer_Release(&v[i]);
    return PyLong_FromSsize_t(bad);
}

/* hash_rows(indptr, slots, values, mapping, m_out, learn, out_indptr, out_slots, out_values,
 *           last) -> (nnz_out, merged_learned)
 * Sparse rows hashed (FeatureHasher.transform, row by row): item k's slot slots[k] (one of the
 * block's m names) becomes the bucket slot mapping[slots[k]] (< m_out); within a row, the
 * items of one bucket add up at the first one's place, left to right (out = out + v), the
 * others merged. last[j] (int64, m): the index of name j's last item that was not merged, in a
 * learned row (learn: uint8 per row), -1 if none; merged_learned: items merged in learned
 * rows. The counts the name cache needs (FeatureHasher.commit). */
static PyObject *hash_rows(PyObject *self, PyObject *args)
{
    PyObject *o[10];
    Py_ssize_t m_out;
    if (!PyArg_ParseTuple(args, "OOOOnOOOOO", &o[0], &o[1], &o[2], &o[3], &m_out, &o[4], &o[5],
                          &o[6], &o[7], &o[8]))
        return NULL;
    Py_buffer v[9];
    const char *names[9] = {"indptr", "slots", "values", "mapping", "learn",
                            "out_indptr", "out_slots", "out_values", "last"};
    const int writable[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1};
    for (int i = 0; i < 9; i++) {
        if (get(o[i], &v[i], writable[i], 0, names[i]) < 0) {
            while (i-- > 0)
                PyBuffer_Release(&v[i]);
            return NULL;
        }
    }
    const int64_t *indptr = v[0].buf;
    const int32_t *slots = v[1].buf, *mapping = v[3].buf;
    const double *values = v[2].buf;
    const unsigned char *learn = v[4].buf;
    int64_t *out_indptr = v[5].buf, *last = v[8].buf;
    int32_t *out_slots = v[6].buf;
    double *out_values = v[7].buf;
    Py_ssize_t n = v[4].len, m = v[3].len / 4;
    Py_ssize_t nnz = n > 0 ? (Py_ssize_t)indptr[n] : 0;
    int bad = v[0].len < (n + 1) * 8 || v[5].len < (n + 1) * 8 || v[1].len < nnz * 4 ||
              v[2].len < nnz * 8 || v[6].len < nnz * 4 || v[7].len < nnz * 8 ||
              v[8].len < m * 8 || m_out < 0;
    for (Py_ssize_t k = 0; !bad && k < nnz; k++)
        bad = slots[k] < 0 || slots[k] >= m;
    for (Py_ssize_t j = 0; !bad && j < m; j++)
        bad = mapping[j] < 0 || mapping[j] >= m_out;
    for (Py_ssize_t i = 0; !bad && i < n; i++)
        bad = indptr[i] > indptr[i + 1] || indptr[0] != 0;
    Py_ssize_t *at = bad ? NULL : PyMem_Malloc((m_out > 0 ? m_out : 1) * sizeof(Py_ssize_t));
    if (bad || at == NULL) {
        for (int i = 0; i < 9; i++)
            PyBuffer_Release(&v[i]);
        if (bad)
            PyErr_SetString(PyExc_ValueError, "hash_rows: inconsistent buffers");
        else
            PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t b = 0; b < m_out; b++)
        at[b] = -1;
    for (Py_ssize_t j = 0; j < m; j++)
        last[j] = -1;
    Py_ssize_t out = 0, merged = 0;
    out_indptr[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t row_start = out;
        for (Py_ssize_t k = (Py_ssize_t)indptr[i]; k < (Py_ssize_t)indptr[i + 1]; k++) {
            int32_t b = mapping[slots[k]];
            Py_ssize_t p = at[b];
            if (p >= row_start) { /* this row has the bucket already */
                out_values[p] = out_values[p] + values[k];
                merged += learn[i] != 0;
                continue;
            }
            at[b] = out;
            out_slots[out] = b;
            out_values[out] = values[k];
            out++;
            if (learn[i])
                last[slots[k]] = k;
        }
        out_indptr[i + 1] = out;
    }
    PyMem_Free(at);
    for (int i = 0; i < 9; i++)
        PyBuffer_Release(&v[i]);
    return Py_BuildValue("nn", out, merged);
}

/* scale_rows(indptr, slots, values, out, learn, n, mean, var, order) -> (bad, n_new)
 * scale_block over sparse rows: each item's value standardised with its slot's statistics
 * (n, mean, var: float64 per slot, updated in place by the learned rows), in the rows' order;
 * order (int32 per slot) gets the slots first counted here (n was 0), in the order they were:
 * the order the scaler's dicts gain them. bad: the first row whose statistics or values would
 * not be finite (-1: none; the caller drops n, mean, var). */
static PyObject *scale_rows(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8]))
        return NULL;
    Py_buffer v[9];
    const char *names[9] = {"indptr", "slots", "values", "out", "learn", "n", "mean", "var",
                            "order"};
    const int writable[9] = {0, 0, 0, 1, 0, 1, 1, 1, 1};
    for (int i = 0; i < 9; i++) {
        if (get(o[i], &v[i], writable[i], 0, names[i]) < 0) {
            while (i-- > 0)
                PyBuffer_Release(&v[i]);
            return NULL;
        }
    }
    const int64_t *indptr = v[0].buf;
    const int32_t *slots = v[1].buf;
    const double *values = v[2].buf;
    double *out = v[3].buf, *n = v[5].buf, *mean = v[6].buf, *var = v[7].buf;
    const unsigned char *learn = v[4].buf;
    int32_t *order = v[8].buf;
    Py_ssize_t rows = v[4].len, m = v[5].len / 8;
    Py_ssize_t nnz = rows > 0 ? (Py_ssize_t)indptr[rows] : 0;
    int bad_args = v[0].len < (rows + 1) * 8 || v[1].len < nnz * 4 || v[2].len < nnz * 8 ||
                   v[3].len < nnz * 8 || v[6].len < m * 8 || v[7].len < m * 8 ||
                   v[8].len < m * 4 || (rows > 0 && indptr[0] != 0);
    for (Py_ssize_t i = 0; !bad_args && i < rows; i++)
        bad_args = indptr[i] > indptr[i + 1];
    for (Py_ssize_t k = 0; !bad_args && k < nnz; k++)
        bad_args = slots[k] < 0 || slots[k] >= m;
    if (bad_args) {
        for (int i = 0; i < 9; i++)
            PyBuffer_Release(&v[i]);
        return PyErr_Format(PyExc_ValueError, "scale_rows: inconsistent buffers");
    }
    Py_ssize_t bad = -1, n_new = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows && bad < 0; i++) {
        int update = learn[i] != 0;
        for (Py_ssize_t k = (Py_ssize_t)indptr[i]; k < (Py_ssize_t)indptr[i + 1]; k++) {
            Py_ssize_t j = slots[k];
            int fresh = n[j] == 0.0;
            if (!scale_value(values[k], &out[k], &n[j], &mean[j], &var[j], update)) {
                bad = i;
                break;
            }
            if (update && fresh)
                order[n_new++] = (int32_t)j;
        }
    }
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 9; i++)
        PyBuffer_Release(&v[i]);
    return Py_BuildValue("nn", bad, n_new);
}

/* rff_rows(indptr, slots, values, rank, W, b, out, D, scale) -> first bad row or -1.
 * rff_block over sparse rows: a row's items summed in the map's order (rank: int32 per slot,
 * the slot's name's place in that order), per component d: p = 0.0, p += v * W[slot, d],
 * then cos(p + b[d]) * scale into out (float64, rows x D); W: float64 (slots x D). */
static PyObject *rff_rows(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_ssize_t D;
    double scale;
    if (!PyArg_ParseTuple(args, "OOOOOOOnd", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &D, &scale))
        return NULL;
    Py_buffer v[7];
    const char *names[7] = {"indptr", "slots", "values", "rank", "W", "b", "out"};
    for (int i = 0; i < 7; i++) {
        if (get(o[i], &v[i], i == 6, 0, names[i]) < 0) {
            while (i-- > 0)
                PyBuffer_Release(&v[i]);
            return NULL;
        }
    }
    const int64_t *indptr = v[0].buf;
    const int32_t *slots = v[1].buf, *rank = v[3].buf;
    const double *values = v[2].buf, *W = v[4].buf, *b = v[5].buf;
    double *out = v[6].buf;
    Py_ssize_t m = v[3].len / 4;
    Py_ssize_t rows = v[0].len / 8 - 1;
    Py_ssize_t nnz = rows > 0 ? (Py_ssize_t)indptr[rows] : 0;
    int bad_args = rows < 0 || D < 0 || v[1].len < nnz * 4 || v[2].len < nnz * 8 ||
                   v[4].len < m * D * 8 || v[5].len < D * 8 || v[6].len < rows * D * 8 ||
                   (rows > 0 && indptr[0] != 0);
    Py_ssize_t widest = 0;
    for (Py_ssize_t i = 0; !bad_args && i < rows; i++) {
        bad_args = indptr[i] > indptr[i + 1];
        if (!bad_args && indptr[i + 1] - indptr[i] > widest)
            widest = (Py_ssize_t)(indptr[i + 1] - indptr[i]);
    }
    for (Py_ssize_t k = 0; !bad_args && k < nnz; k++)
        bad_args = slots[k] < 0 || slots[k] >= m;
    Py_ssize_t *order = bad_args ? NULL : PyMem_Malloc((widest + 1) * sizeof(Py_ssize_t));
    if (bad_args || order == NULL) {
        for (int i = 0; i < 7; i++)
            PyBuffer_Release(&v[i]);
        if (bad_args)
            return PyErr_Format(PyExc_ValueError, "rff_rows: inconsistent buffers");
        return PyErr_NoMemory();
    }
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows && bad < 0; i++) {
        Py_ssize_t k0 = (Py_ssize_t)indptr[i], len = (Py_ssize_t)indptr[i + 1] - k0;
        for (Py_ssize_t a = 0; a < len; a++) { /* the row's items in rank order (insertion) */
            Py_ssize_t k = k0 + a, c = a;
            while (c > 0 && rank[slots[order[c - 1]]] > rank[slots[k]]) {
                order[c] = order[c - 1];
                c--;
            }
            order[c] = k;
        }
        double *row_out = out + i * D;
        for (Py_ssize_t d = 0; d < D; d++) {
            double p = 0.0;
            for (Py_ssize_t a = 0; a < len; a++) {
                Py_ssize_t k = order[a];
                p += values[k] * W[(Py_ssize_t)slots[k] * D + d];
            }
            if (!isfinite(p)) {
                bad = i;
                break;
            }
            row_out[d] = cos(p + b[d]) * scale;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(order);
    for (int i = 0; i < 7; i++)
        PyBuffer_Release(&v[i]);
    return PyLong_FromSsize_t(bad);
}

static PyMethodDef methods[] = {
    {"scale_block", scale_block, METH_VARARGS, "Standardise a dense block row by row."},
    {"scale_dict", scale_dict, METH_VARARGS, "Standardise a dict (Standardizer.transform)."},
    {"commit_dict", commit_dict, METH_VARARGS, "Store statistics (Standardizer.commit)."},
    {"murmur3_32", murmur3_32, METH_VARARGS, "MurmurHash3_x86_32 of bytes, unsigned."},
    {"rff_block", rff_block, METH_VARARGS, "Random Fourier features of a dense block."},
    {"hash_rows", hash_rows, METH_VARARGS, "Sparse rows hashed (FeatureHasher.transform)."},
    {"scale_rows", scale_rows, METH_VARARGS, "Standardise sparse rows row by row."},
    {"rff_rows", rff_rows, METH_VARARGS, "Random Fourier features of sparse rows."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_features", "Feature preprocessing kernels.", -1, methods,
};

PyMODINIT_FUNC PyInit__features(void) { return PyModule_Create(&module); }
