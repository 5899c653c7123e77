/* The drift monitor's loop in C: ADWIN over chunks of the mistake stream.
 *
 * The same floating-point operations in the same order as the readable reference,
 * stream_perceptron/adwin.py (itself held to River's ADWIN by tests/fast/test_adwin.py), so the
 * two tiers find the same drifts at the same positions and save the same state. What makes this
 * worth a C file: a block's mistakes are fed in one call, where River's ADWIN costs about 0.8 us
 * per call from Python.
 *
 * Only public CPython API (sequences, lists, floats, ints, dicts).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#define MAX_BUCKETS 5
#define MIN_WINDOW_LENGTH 5.0
#define GRACE_PERIOD 10.0
#define MAX_LEVELS 62
#define MAX_RECENT 1024

typedef struct {
    PyObject_HEAD
    double delta;
    long chunk;
    long recent_cap;
    long clock;
    /* the window */
    double total, variance, width;
    int nlevels;
    int count[MAX_LEVELS];
    double tot[MAX_LEVELS][MAX_BUCKETS + 1];
    double var[MAX_LEVELS][MAX_BUCKETS + 1];
    long long tick;
    int detected;
    /* the chunking */
    long long seen;
    long open_sum;
    long recent[MAX_RECENT]; /* a ring: the last recent_cap chunk sums */
    long recent_head, recent_len;
    long long recent_sum;
} ChunkedAdwin;

static void window_reset(ChunkedAdwin *s) {
    s->total = 0.0;
    s->variance = 0.0;
    s->width = 0.0;
    s->nlevels = 1;
    s->count[0] = 0;
    s->tick = 0;
    s->detected = 0;
}

static void level_drop_front(ChunkedAdwin *s, int i, int n) {
    int c = s->count[i];
    for (int k = n; k < c; k++) {
        s->tot[i][k - n] = s->tot[i][k];
        s->var[i][k - n] = s->var[i][k];
    }
    s->count[i] = c - n;
}

static void window_insert(ChunkedAdwin *s, double value) {
    s->tot[0][s->count[0]] = value;
    s->var[0][s->count[0]] = 0.0;
    s->count[0]++;
    s->width += 1.0;
    double incremental = 0.0;
    if (s->width > 1.0) {
        double d = value - s->total / (s->width - 1.0);
        incremental = (s->width - 1.0) * d * d / s->width;
    }
    s->variance += incremental;
    s->total += value;
    int i = 0;
    while (s->count[i] == MAX_BUCKETS + 1) {
        double n = (double)(1LL << i);
        double t0 = s->tot[i][0], t1 = s->tot[i][1], v0 = s->var[i][0], v1 = s->var[i][1];
        double mu1 = t0 / n, mu2 = t1 / n;
        double mt = t0 + t1;
        double mv = v0 + v1 + n * 0.5 * (mu1 - mu2) * (mu1 - mu2);
        if (i + 1 == s->nlevels) {
            if (s->nlevels == MAX_LEVELS) /* 2^61 values: never reached */
                break;
            s->count[s->nlevels++] = 0;
        }
        s->tot[i + 1][s->count[i + 1]] = mt;
        s->var[i + 1][s->count[i + 1]] = mv;
        s->count[i + 1]++;
        level_drop_front(s, i, 2);
        if (s->count[i + 1] <= MAX_BUCKETS)
            break;
        i++;
    }
}

static void window_drop_oldest(ChunkedAdwin *s) {
    int last = s->nlevels - 1;
    double n = (double)(1LL << last);
    double u = s->tot[last][0], v = s->var[last][0];
    double mu = u / n;
    s->width -= n;
    s->total -= u;
    double mu_window = s->total / s->width;
    s->variance -= v + n * s->width * (mu - mu_window) * (mu - mu_window) / (n + s->width);
    level_drop_front(s, last, 1);
    if (s->count[last] == 0 && last > 0)
        s->nlevels--;
}

/* The cut test of the reference (adwin.Window._cut), with what is the same for every cut of one
 * pass over the window computed once: dp = log(2 log(width) / delta), vw = variance / width and
 * third = 2/3 dp (the same operations on the same values: the same doubles). The bound is
 * sqrt(...) + c m, never below third m (a square root is >= 0 and rounding is monotone), so a mean
 * difference within third m is no cut without the square root. */
static int window_cut(double dp, double vw, double third, double n0, double n1, double delta_mean) {
    double m = 1.0 / (n0 - MIN_WINDOW_LENGTH + 1.0) + 1.0 / (n1 - MIN_WINDOW_LENGTH + 1.0);
    double b = third * m;
    double d = fabs(delta_mean);
    if (d <= b)
        return 0;
    return d > sqrt(2.0 * m * vw * dp) + b;
}

static int window_detect(ChunkedAdwin *s) {
    s->tick++;
    if (s->tick % s->clock != 0 || !(s->width > GRACE_PERIOD))
        return 0;
    int changed = 0, again = 1;
    while (again) {
        again = 0;
        double n0 = 0.0, n1 = s->width, u0 = 0.0, u1 = s->total;
        double dp = log(2.0 * log(s->width) / s->delta);
        double vw = s->variance / s->width, third = 2.0 / 3.0 * dp;
        for (int i = s->nlevels - 1; i >= 0 && !again; i--) {
            double size = (double)(1LL << i);
            int c = s->count[i];
            for (int k = 0; k < c; k++) {
                double t = s->tot[i][k];
                n0 += size;
                n1 -= size;
                u0 += t;
                u1 -= t;
                if (i == 0 && k == c - 1)
                    break;
                if (n1 >= MIN_WINDOW_LENGTH && n0 >= MIN_WINDOW_LENGTH &&
                    window_cut(dp, vw, third, n0, n1, u0 / n0 - u1 / n1)) {
                    again = changed = 1;
                    break;
                }
            }
        }
        if (again)
            window_drop_oldest(s);
    }
    return changed;
}

static int window_update(ChunkedAdwin *s, double value) {
    if (s->detected)
        window_reset(s);
    window_insert(s, value);
    s->detected = window_detect(s);
    return s->detected;
}

/* closes the open chunk: whether it revealed a drift (a detection where the rate rose) */
static int close_chunk(ChunkedAdwin *s) {
    double before = s->width != 0.0 ? s->total / s->width : 0.0;
    int detected = window_update(s, (double)s->open_sum / (double)s->chunk);
    if (s->recent_len == s->recent_cap) {
        s->recent_sum -= s->recent[s->recent_head];
        s->recent[s->recent_head] = s->open_sum;
        s->recent_head = (s->recent_head + 1) % s->recent_cap;
    } else {
        s->recent[(s->recent_head + s->recent_len) % s->recent_cap] = s->open_sum;
        s->recent_len++;
    }
    s->recent_sum += s->open_sum;
    s->open_sum = 0;
    double recent = (double)s->recent_sum / (double)(s->chunk * s->recent_len);
    return detected && recent > before;
}

static int ChunkedAdwin_init(ChunkedAdwin *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"delta", "chunk", "recent", "clock", NULL};
    double delta = 0.002;
    long chunk = 8, recent = 16, clock = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|dlll", kwlist, &delta, &chunk, &recent,
                                     &clock))
        return -1;
    if (!(delta > 0.0 && delta < 1.0) || chunk < 1 || chunk > 1000000 || recent < 1 ||
        recent > MAX_RECENT || clock < 1) {
        PyErr_SetString(PyExc_ValueError,
                        "delta in (0, 1), chunk >= 1, 1 <= recent <= 1024, clock >= 1");
        return -1;
    }
    s->delta = delta;
    s->chunk = chunk;
    s->recent_cap = recent;
    s->clock = clock;
    window_reset(s);
    s->seen = 0;
    s->open_sum = 0;
    s->recent_head = s->recent_len = 0;
    s->recent_sum = 0;
    return 0;
}

/* observe(mistakes) -> list of drift positions: mistakes a sequence of truthy values */
static PyObject *ChunkedAdwin_observe(ChunkedAdwin *s, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "mistakes must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *drifts = PyList_New(0);
    if (drifts == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    Py_ssize_t j = 0;
    while (j < n) {
        /* the examples up to the end of the open chunk, or of the input */
        long long left = s->chunk - s->seen % s->chunk;
        Py_ssize_t end = n - j < left ? n : j + (Py_ssize_t)left;
        long sum = 0;
        s->seen += end - j;
        for (; j < end; j++) {
            PyObject *m = items[j];
            int truth;
            if (m == Py_True)
                truth = 1;
            else if (m == Py_False)
                truth = 0;
            else if ((truth = PyObject_IsTrue(m)) < 0) {
                s->seen -= end - j; /* what was not counted */
                s->open_sum += sum;
                goto fail;
            }
            sum += truth;
        }
        s->open_sum += sum;
        if (s->seen % s->chunk == 0 && close_chunk(s)) {
            PyObject *at = PyLong_FromLongLong(s->seen);
            if (at == NULL || PyList_Append(drifts, at) < 0) {
                Py_XDECREF(at);
                goto fail;
            }
            Py_DECREF(at);
        }
    }
    Py_DECREF(seq);
    return drifts;
fail:
    Py_DECREF(seq);
    Py_DECREF(drifts);
    return NULL;
}

static PyObject *ChunkedAdwin_get_state(ChunkedAdwin *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *levels = PyList_New(s->nlevels);
    PyObject *recent = PyList_New(s->recent_len);
    if (levels == NULL || recent == NULL)
        goto fail;
    for (int i = 0; i < s->nlevels; i++) {
        PyObject *level = PyList_New(s->count[i]);
        if (level == NULL)
            goto fail;
        PyList_SET_ITEM(levels, i, level);
        for (int k = 0; k < s->count[i]; k++) {
            PyObject *b = Py_BuildValue("[dd]", s->tot[i][k], s->var[i][k]);
            if (b == NULL)
                goto fail;
            PyList_SET_ITEM(level, k, b);
        }
    }
    for (long k = 0; k < s->recent_len; k++) {
        PyObject *r = PyLong_FromLong(s->recent[(s->recent_head + k) % s->recent_cap]);
        if (r == NULL)
            goto fail;
        PyList_SET_ITEM(recent, k, r);
    }
    PyObject *window = Py_BuildValue("{s:d,s:d,s:d,s:N,s:L,s:O}", "total", s->total,
                                     "variance", s->variance, "width", s->width, "levels",
                                     levels, "tick", s->tick, "detected",
                                     s->detected ? Py_True : Py_False);
    levels = NULL;
    if (window == NULL)
        goto fail;
    return Py_BuildValue("{s:L,s:l,s:N,s:N}", "seen", s->seen, "open_sum", s->open_sum,
                         "recent", recent, "window", window);
fail:
    Py_XDECREF(levels);
    Py_XDECREF(recent);
    return NULL;
}

/* _set(seen, open_sum, recent, total, variance, width, levels, tick, detected): a state the Python
 * side has checked (adwin._window_fields and ChunkedAdwin.load_state's counts) */
static PyObject *ChunkedAdwin_set(ChunkedAdwin *s, PyObject *args) {
    long long seen;
    long open_sum;
    PyObject *recent, *levels;
    double total, variance, width;
    long long tick;
    int detected;
    if (!PyArg_ParseTuple(args, "LlO!dddO!Lp", &seen, &open_sum, &PyList_Type, &recent, &total,
                          &variance, &width, &PyList_Type, &levels, &tick, &detected))
        return NULL;
    Py_ssize_t nl = PyList_GET_SIZE(levels), nr = PyList_GET_SIZE(recent);
    if (nl < 1 || nl > MAX_LEVELS || nr > s->recent_cap) {
        PyErr_SetString(PyExc_ValueError, "a drift window out of bounds");
        return NULL;
    }
    int count[MAX_LEVELS];
    double tot[MAX_LEVELS][MAX_BUCKETS + 1], var[MAX_LEVELS][MAX_BUCKETS + 1];
    for (Py_ssize_t i = 0; i < nl; i++) {
        PyObject *level = PyList_GET_ITEM(levels, i);
        if (!PyList_Check(level) || PyList_GET_SIZE(level) > MAX_BUCKETS) {
            PyErr_SetString(PyExc_ValueError, "a drift window level out of bounds");
            return NULL;
        }
        count[i] = (int)PyList_GET_SIZE(level);
        for (int k = 0; k < count[i]; k++) {
            PyObject *b = PyList_GET_ITEM(level, k);
            if (!PyList_Check(b) || PyList_GET_SIZE(b) != 2) {
                PyErr_SetString(PyExc_ValueError, "a drift window bucket is not [total, variance]");
                return NULL;
            }
            tot[i][k] = PyFloat_AsDouble(PyList_GET_ITEM(b, 0));
            var[i][k] = PyFloat_AsDouble(PyList_GET_ITEM(b, 1));
            if (PyErr_Occurred())
                return NULL;
        }
    }
    long sums[MAX_RECENT];
    for (Py_ssize_t k = 0; k < nr; k++) {
        sums[k] = PyLong_AsLong(PyList_GET_ITEM(recent, k));
        if (sums[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    s->seen = seen;
    s->open_sum = open_sum;
    s->recent_head = 0;
    s->recent_len = nr;
    s->recent_sum = 0;
    for (Py_ssize_t k = 0; k < nr; k++) {
        s->recent[k] = sums[k];
        s->recent_sum += sums[k];
    }
    s->total = total;
    s->variance = variance;
    s->width = width;
    s->nlevels = (int)nl;
    for (int i = 0; i < nl; i++) {
        s->count[i] = count[i];
        for (int k = 0; k < count[i]; k++) {
            s->tot[i][k] = tot[i][k];
            s->var[i][k] = var[i][k];
        }
    }
    s->tick = tick;
    s->detected = detected;
    Py_RETURN_NONE;
}

static PyObject *ChunkedAdwin_get_seen(ChunkedAdwin *s, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(s->seen);
}

static PyMethodDef ChunkedAdwin_methods[] = {
    {"observe", (PyCFunction)ChunkedAdwin_observe, METH_O,
     "observe(mistakes) -> list[int]: feed learned examples' mistakes; the drifts' positions"},
    {"get_state", (PyCFunction)ChunkedAdwin_get_state, METH_NOARGS, "the state as JSON types"},
    {"_set", (PyCFunction)ChunkedAdwin_set, METH_VARARGS, "set a checked state"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ChunkedAdwin_getset[] = {
    {"seen", (getter)ChunkedAdwin_get_seen, NULL, "learned examples observed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ChunkedAdwinType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stream_perceptron._drift.ChunkedAdwin",
    .tp_basicsize = sizeof(ChunkedAdwin),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ADWIN over chunks of the mistake stream (reference: stream_perceptron.adwin)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ChunkedAdwin_init,
    .tp_methods = ChunkedAdwin_methods,
    .tp_getset = ChunkedAdwin_getset,
};

static struct PyModuleDef drift_module = {
    PyModuleDef_HEAD_INIT, "_drift", "ADWIN over chunks of the mistake stream, in C.", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__drift(void) {
    if (PyType_Ready(&ChunkedAdwinType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&drift_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ChunkedAdwinType);
    if (PyModule_AddObject(m, "ChunkedAdwin", (PyObject *)&ChunkedAdwinType) < 0) {
        Py_DECREF(&ChunkedAdwinType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
