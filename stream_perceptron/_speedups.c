/*
 * stream_perceptron._speedups: exact C kernels for the learners' dict API.
 *
 * Every kernel does its double arithmetic in exactly the order of the pure-Python loops of
 * stream_perceptron/learners/perceptron.py and multiclass.py (start at 0.0, one `+=` per item,
 * in the dict's order, missing weights skipped), so results are bit-identical. Build with
 * -ffp-contract=off: a fused multiply-add would round once instead of twice.
 *
 * A kernel only handles feature values that are exact Python floats, or exact ints of at most
 * 2**53 in magnitude (converted exactly, as Python converts them), in exact dicts, with exact
 * float weights. On anything else it changes nothing and returns None (or False), and the
 * caller runs its Python loop, so behaviour (numpy scalars, bools, strings and their
 * exceptions) stays that of Python. Exceptions raised by a key's __hash__ or __eq__ during a
 * lookup propagate, as they do from the Python loop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <math.h>

#define EXACT_INT_LIMIT 9007199254740992LL /* 2**53: every int up to it is a double */
#define STACK_ITEMS 64

/* One (key, value) of x, both references owned while the kernel runs. */
typedef struct {
    PyObject *key;
    PyObject *value;
    double v;     /* the value as Python converts it for float arithmetic */
    long long iv; /* the value when it is an int */
    int is_int;
} Item;

typedef struct {
    Item *items;
    Py_ssize_t n;
    Item stack[STACK_ITEMS];
} Items;

/* Whether `obj` is a float, or an int converted exactly; sets *v, *iv, *is_int. */
static int
number_value(PyObject *obj, double *v, long long *iv, int *is_int)
{
    if (PyFloat_CheckExact(obj)) {
        *v = PyFloat_AS_DOUBLE(obj);
        *iv = 0;
        *is_int = 0;
        return 1;
    }
    if (PyLong_CheckExact(obj)) {
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (overflow || value > EXACT_INT_LIMIT || value < -EXACT_INT_LIMIT) {
            return 0;
        }
        *v = (double)value;
        *iv = value;
        *is_int = 1;
        return 1;
    }
    return 0;
}

static void
items_release(Items *it)
{
    for (Py_ssize_t i = 0; i < it->n; i++) {
        Py_DECREF(it->items[i].key);
        Py_DECREF(it->items[i].value);
    }
    if (it->items != it->stack) {
        PyMem_Free(it->items);
    }
    it->items = it->stack;
    it->n = 0;
}

/*
 * Load the items of x. 1: loaded (references held: release with items_release);
 * 0: not handled (x not an exact dict, or a value that is not a float or small int; nothing
 * held); -1: error set.
 */
static int
items_load(Items *it, PyObject *x)
{
    it->items = it->stack;
    it->n = 0;
    if (!PyDict_CheckExact(x)) {
        return 0;
    }
    Py_ssize_t size = PyDict_GET_SIZE(x);
    if (size > STACK_ITEMS) {
        it->items = PyMem_New(Item, size);
        if (it->items == NULL) {
            it->items = it->stack;
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    /* Nothing here runs Python code, so x cannot change while it is read. */
    while (PyDict_Next(x, &pos, &key, &value)) {
        if (it->n >= size) { /* cannot happen: x does not change while it is read */
            items_release(it);
            return 0;
        }
        Item *item = &it->items[it->n];
        if (!number_value(value, &item->v, &item->iv, &item->is_int)) {
            items_release(it);
            return 0;
        }
        Py_INCREF(key);
        Py_INCREF(value);
        item->key = key;
        item->value = value;
        it->n++;
    }
    return 1;
}

/* The items as a flat tuple (k0, v0, k1, v1, ...); takes over the references held. */
static PyObject *
items_snapshot(Items *it)
{
    PyObject *snap = PyTuple_New(2 * it->n);
    if (snap == NULL) {
        items_release(it);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < it->n; i++) {
        PyTuple_SET_ITEM(snap, 2 * i, it->items[i].key);
        PyTuple_SET_ITEM(snap, 2 * i + 1, it->items[i].value);
    }
    it->n = 0; /* the tuple owns them now */
    items_release(it);
    return snap;
}

/*
 * dot = sum of w[k] * v over the items whose key is in w, in x's order. 1: done;
 * 0: not handled (a weight that is not a float); -1: error (from a key's hash or eq).
 */
static int
items_dot(Items *it, PyObject *w, double *dot)
{
    double acc = 0.0;
    for (Py_ssize_t i = 0; i < it->n; i++) {
        PyObject *wk = PyDict_GetItemWithError(w, it->items[i].key);
        if (wk == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            continue;
        }
        if (!PyFloat_CheckExact(wk)) {
            return 0;
        }
        acc += PyFloat_AS_DOUBLE(wk) * it->items[i].v;
    }
    *dot = acc;
    return 1;
}

/*
 * The norm of x as both learners compute it in Python: sq = 0.0, then sq += v * v for every
 * item in x's order (a plain left fold; an int square converted, correctly rounded, when
 * added, which is what (double)iv * (double)iv gives for |iv| <= 2**53), math.sqrt(sq).
 */
static double
items_norm(Items *it)
{
    double sq = 0.0;
    for (Py_ssize_t i = 0; i < it->n; i++) {
        sq += it->items[i].v * it->items[i].v;
    }
    return sqrt(sq);
}

/* The step of axpy: an exact float, or an exact int converted exactly. */
typedef struct {
    double v;
    long long iv;
    int is_int;
} Step;

/*
 * w[k] = w.get(k, 0.0) + step * v for every item, in x's order. 0 on success, -1 on error.
 * An int step times an int value is an exact int in Python, converted when added: its zero is
 * +0.0, never -0.0.
 */
static int
items_axpy(Items *it, PyObject *w, Step *step, PyObject *step_obj)
{
    for (Py_ssize_t i = 0; i < it->n; i++) {
        Item *item = &it->items[i];
        PyObject *old = PyDict_GetItemWithError(w, item->key);
        if (old == NULL && PyErr_Occurred()) {
            return -1;
        }
        PyObject *updated;
        if (old == NULL || PyFloat_CheckExact(old)) {
            double prod;
            if (step->is_int && item->is_int && (step->iv == 0 || item->iv == 0)) {
                prod = 0.0;
            }
            else {
                prod = step->v * item->v;
            }
            double base = old == NULL ? 0.0 : PyFloat_AS_DOUBLE(old);
            updated = PyFloat_FromDouble(base + prod);
        }
        else {
            /* a weight that is not a float: Python's own arithmetic */
            Py_INCREF(old);
            PyObject *prod = PyNumber_Multiply(step_obj, item->value);
            updated = prod == NULL ? NULL : PyNumber_Add(old, prod);
            Py_XDECREF(prod);
            Py_DECREF(old);
        }
        if (updated == NULL) {
            return -1;
        }
        int failed = PyDict_SetItem(w, item->key, updated);
        Py_DECREF(updated);
        if (failed) {
            return -1;
        }
    }
    return 0;
}

/*
 * The multi-class scores dot(w[c], x) + b[c] for every class c of w, in w's order: either the
 * argmax (first class wins ties, as `best is None or s > best_score`) into *best, or every
 * score into the dict `scores`. 1: done; 0: not handled; -1: error.
 */
static int
class_scores(Items *it, PyObject *w, PyObject *b, PyObject **best, PyObject *scores)
{
    Py_ssize_t pos = 0;
    PyObject *c, *wc;
    double best_score = -INFINITY;
    int status = 1;
    if (best != NULL) {
        *best = Py_NewRef(Py_None);
    }
    while (status == 1 && PyDict_Next(w, &pos, &c, &wc)) {
        if (!PyDict_CheckExact(wc)) {
            status = 0;
            break;
        }
        /* held: a key's __eq__ could change w during the lookups */
        Py_INCREF(c);
        Py_INCREF(wc);
        double dot = 0.0;
        status = items_dot(it, wc, &dot);
        if (status == 1) {
            PyObject *bc = PyDict_GetItemWithError(b, c);
            if (bc == NULL) {
                status = PyErr_Occurred() ? -1 : 0;
            }
            else if (!PyFloat_CheckExact(bc)) {
                status = 0;
            }
            else {
                double s = dot + PyFloat_AS_DOUBLE(bc);
                if (best != NULL) {
                    if (*best == Py_None || s > best_score) {
                        Py_SETREF(*best, Py_NewRef(c));
                        best_score = s;
                    }
                }
                else {
                    PyObject *value = PyFloat_FromDouble(s);
                    if (value == NULL || PyDict_SetItem(scores, c, value) < 0) {
                        status = -1;
                    }
                    Py_XDECREF(value);
                }
            }
        }
        Py_DECREF(wc);
        Py_DECREF(c);
    }
    if (status != 1 && best != NULL) {
        Py_CLEAR(*best);
    }
    return status;
}

/*
 * Both dots of an averaged learner in one pass over the items whose key is in w, in x's
 * order: *dot the sum of w[k] * v, *udot the sum of u[k] * v over those of them whose key is
 * in u too (as Perceptron._average_score and MulticlassPerceptron._average_scores compute
 * them). 1: done; 0: not handled (a weight or accumulator that is not a float); -1: error.
 */
static int
items_avg_dot(Items *it, PyObject *w, PyObject *u, double *dot, double *udot)
{
    double acc = 0.0, uacc = 0.0;
    for (Py_ssize_t i = 0; i < it->n; i++) {
        PyObject *wk = PyDict_GetItemWithError(w, it->items[i].key);
        if (wk == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            continue;
        }
        if (!PyFloat_CheckExact(wk)) {
            return 0;
        }
        double v = it->items[i].v;
        acc += PyFloat_AS_DOUBLE(wk) * v;
        PyObject *uk = PyDict_GetItemWithError(u, it->items[i].key);
        if (uk == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
        }
        else if (!PyFloat_CheckExact(uk)) {
            return 0;
        }
        else {
            uacc += PyFloat_AS_DOUBLE(uk) * v;
        }
    }
    *dot = acc;
    *udot = uacc;
    return 1;
}

/*
 * The averaged multi-class scores: for every class c of w, in w's order, the plain score
 * s = dot(w[c], x) + b[c] and the averaged score s - (udot + ub[c]) / t (see items_avg_dot).
 * Their argmaxes (first class on ties) into *best and *abest, or the averaged scores into
 * the dict `ascores`. 1: done; 0: not handled; -1: error.
 */
static int
class_avg_scores(Items *it, PyObject *w, PyObject *b, PyObject *u, PyObject *ub, double t,
                 PyObject **best, PyObject **abest, PyObject *ascores)
{
    Py_ssize_t pos = 0;
    PyObject *c, *wc;
    double best_score = -INFINITY, abest_score = -INFINITY;
    int status = 1;
    if (best != NULL) {
        *best = Py_NewRef(Py_None);
        *abest = Py_NewRef(Py_None);
    }
    while (status == 1 && PyDict_Next(w, &pos, &c, &wc)) {
        if (!PyDict_CheckExact(wc)) {
            status = 0;
            break;
        }
        Py_INCREF(c);
        Py_INCREF(wc);
        PyObject *uc = PyDict_GetItemWithError(u, c);
        PyObject *bc = uc == NULL ? NULL : PyDict_GetItemWithError(b, c);
        PyObject *ubc = bc == NULL ? NULL : PyDict_GetItemWithError(ub, c);
        if (ubc == NULL) {
            status = PyErr_Occurred() ? -1 : 0;
        }
        else if (!PyDict_CheckExact(uc) || !PyFloat_CheckExact(bc) || !PyFloat_CheckExact(ubc)) {
            status = 0;
        }
        else {
            Py_INCREF(uc);
            double dot = 0.0, udot = 0.0;
            status = items_avg_dot(it, wc, uc, &dot, &udot);
            Py_DECREF(uc);
            if (status == 1) {
                double s = dot + PyFloat_AS_DOUBLE(bc);
                double as = s - (udot + PyFloat_AS_DOUBLE(ubc)) / t;
                if (best != NULL) {
                    if (*best == Py_None || s > best_score) {
                        Py_SETREF(*best, Py_NewRef(c));
                        best_score = s;
                    }
                    if (*abest == Py_None || as > abest_score) {
                        Py_SETREF(*abest, Py_NewRef(c));
                        abest_score = as;
                    }
                }
                else {
                    PyObject *value = PyFloat_FromDouble(as);
                    if (value == NULL || PyDict_SetItem(ascores, c, value) < 0) {
                        status = -1;
                    }
                    Py_XDECREF(value);
                }
            }
        }
        Py_DECREF(wc);
        Py_DECREF(c);
    }
    if (status != 1 && best != NULL) {
        Py_CLEAR(*best);
        Py_CLEAR(*abest);
    }
    return status;
}

/* The tuple (a, b) or (a, b, c): steals the references given; NULL (all released) on error. */
static PyObject *
pack(PyObject *a, PyObject *b, PyObject *c)
{
    Py_ssize_t n = c == NULL ? 2 : 3;
    PyObject *result = NULL;
    if (a != NULL && b != NULL && (n == 2 || c != NULL)) {
        result = PyTuple_New(n);
    }
    if (result == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, a);
    PyTuple_SET_ITEM(result, 1, b);
    if (c != NULL) {
        PyTuple_SET_ITEM(result, 2, c);
    }
    return result;
}

static int
check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t low, Py_ssize_t high)
{
    if (nargs < low || nargs > high) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd to %zd arguments (%zd given)", name, low,
                     high, nargs);
        return -1;
    }
    return 0;
}

/* The divisor t: an int of at most 2**53 or a float, finite and >= 1, as a double (as
 * Python's true division converts it). */
static int
count_value(PyObject *obj, double *t)
{
    double v;
    long long iv;
    int is_int;
    if (!number_value(obj, &v, &iv, &is_int) || !(v >= 1.0) || !isfinite(v)) {
        return 0;
    }
    *t = v;
    return 1;
}

/*
 * The kernels' prologue, in this order: name() takes low to high arguments (TypeError
 * otherwise); the optional snapshot flag args[low] into *want_snapshot (0 when absent or
 * when high == low); args[0..ndicts-1] exact dicts and, with t, args[ndicts] a divisor
 * (count_value) into *t; x = args[low - 1] loaded into it (items_load). 1: loaded (release
 * the items); 0: not handled (the kernel returns None, nothing held); -1: error set.
 */
static int
kernel_begin(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t low,
             Py_ssize_t high, Py_ssize_t ndicts, double *t, Items *it, int *want_snapshot)
{
    if (check_nargs(name, nargs, low, high) < 0) {
        return -1;
    }
    *want_snapshot = 0;
    if (nargs > low && (*want_snapshot = PyObject_IsTrue(args[low])) < 0) {
        return -1;
    }
    for (Py_ssize_t i = 0; i < ndicts; i++) {
        if (!PyDict_CheckExact(args[i])) {
            return 0;
        }
    }
    if (t != NULL && !count_value(args[ndicts], t)) {
        return 0;
    }
    return items_load(it, args[low - 1]);
}

/* What a kernel returns for a pass that did not give a result: NULL (status < 0, error set)
 * or None (status 0, not handled). */
static PyObject *
unhandled(int status)
{
    if (status < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* unhandled(status), the items released first. */
static PyObject *
release_unhandled(Items *it, int status)
{
    items_release(it);
    return unhandled(status);
}

/* The tuple (first, r) or, with want_snapshot, (first, r, snapshot of the items); the items
 * released either way. Steals first; NULL (first released) on error. */
static PyObject *
pack_norm(Items *it, int want_snapshot, PyObject *first, double r)
{
    if (!want_snapshot) {
        items_release(it);
        return pack(first, PyFloat_FromDouble(r), NULL);
    }
    PyObject *snap = items_snapshot(it);
    if (snap == NULL) {
        Py_XDECREF(first);
        return NULL;
    }
    return pack(first, PyFloat_FromDouble(r), snap);
}

/* The scores dict a class_scores/class_avg_scores pass filled (status 1), or unhandled(status)
 * (the dict released); the items released either way. */
static PyObject *
scores_result(Items *it, int status, PyObject *scores)
{
    items_release(it);
    if (status <= 0) {
        Py_DECREF(scores);
        return unhandled(status);
    }
    return scores;
}

PyDoc_STRVAR(dot_norm_doc,
"dot_norm(w, x, snapshot=False, /)\n"
"--\n"
"\n"
"Binary perceptron: ``(dot, r)`` where ``dot`` is the sum of ``w[k] * v`` over the items of x\n"
"whose key is in w and ``r = math.sqrt(sq)``, ``sq`` the sum of ``v * v`` over all items, both\n"
"accumulated from 0.0 in x's order, exactly as ``Perceptron._learn``'s loop. With snapshot\n"
"true, ``(dot, r, snapshot)``, snapshot the tuple ``(k0, v0, k1, v1, ...)`` of x's key and\n"
"value objects, for :func:`recall`.\n"
"\n"
"None when not handled: x or w not an exact dict, a value that is not a float or an int of\n"
"at most 2**53 in magnitude, or a weight that is not a float.");

static PyObject *
dot_norm(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = kernel_begin("dot_norm", args, nargs, 2, 3, 1, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *w = args[0];
    double dot = 0.0;
    status = items_dot(&it, w, &dot);
    if (status <= 0) {
        return release_unhandled(&it, status);
    }
    double r = items_norm(&it);
    return pack_norm(&it, want_snapshot, PyFloat_FromDouble(dot), r);
}

PyDoc_STRVAR(class_argmax_doc,
"class_argmax(w, b, x, snapshot=False, /)\n"
"--\n"
"\n"
"Multi-class perceptron: ``(y_hat, r)``, ``y_hat`` the class of w (a dict of weight dicts)\n"
"with the largest score ``dot(w[c], x) + b[c]`` (the first such class on ties, None when w\n"
"is empty; as ``_argmax(MulticlassPerceptron._scores(x, w, b))``) and ``r`` the value of\n"
"the norm of x (``MulticlassPerceptron._note_norm``). With snapshot true, ``(y_hat, r, snapshot)``\n"
"(see :func:`dot_norm`).\n"
"\n"
"None when not handled (see :func:`dot_norm`; also a class missing from b, or a class's\n"
"weights or bias of another type).");

static PyObject *
class_argmax(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = kernel_begin("class_argmax", args, nargs, 3, 4, 2, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *w = args[0], *b = args[1];
    double r = items_norm(&it);
    PyObject *best = NULL;
    status = class_scores(&it, w, b, &best, NULL);
    if (status <= 0) {
        return release_unhandled(&it, status);
    }
    return pack_norm(&it, want_snapshot, best, r);
}

PyDoc_STRVAR(class_scores_doc,
"class_scores(w, b, x, /)\n"
"--\n"
"\n"
"Multi-class perceptron: the dict ``{c: dot(w[c], x) + b[c]}`` over the classes of w in\n"
"order, exactly as ``MulticlassPerceptron._scores``. None when not handled (see\n"
":func:`class_argmax`).");

static PyObject *
class_scores_py(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = kernel_begin("class_scores", args, nargs, 3, 3, 2, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *w = args[0], *b = args[1];
    PyObject *scores = PyDict_New();
    if (scores == NULL) {
        return release_unhandled(&it, -1);
    }
    return scores_result(&it, class_scores(&it, w, b, NULL, scores), scores);
}

PyDoc_STRVAR(axpy_doc,
"axpy(w, x, step, /)\n"
"--\n"
"\n"
"``w[k] = w.get(k, 0.0) + step * v`` for every item of x, in x's order (new keys are added\n"
"in that order), with Python's arithmetic to the last bit. True when done; False when not\n"
"handled (w or x not an exact dict, step or a value not a float or an int of at most 2**53\n"
"in magnitude), and then w is unchanged.");

static PyObject *
axpy(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("axpy", nargs, 3, 3) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *x = args[1], *step_obj = args[2];
    Step step;
    if (!PyDict_CheckExact(w) || !number_value(step_obj, &step.v, &step.iv, &step.is_int)) {
        Py_RETURN_FALSE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_FALSE;
    }
    status = items_axpy(&it, w, &step, step_obj);
    items_release(&it);
    if (status < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

#define MAX_TARGETS 4

PyDoc_STRVAR(axpy_finite_doc,
"axpy_finite(x, w1, a1, w2=None, a2=None, ..., /)\n"
"--\n"
"\n"
"``wi[k] = wi.get(k, 0.0) + ai * v`` for every item of x (in x's order) and every pair\n"
"``(wi, ai)`` (1 to 4 distinct dicts), all or nothing, exactly as\n"
"``stream_perceptron.learners._base.add_scaled``: every new value is computed first; True when\n"
"all are finite and written; False when one is not (nothing written); None when not handled\n"
"(x or a wi not an exact dict, a value or a step not a float or an int of at most 2**53 in\n"
"magnitude, an existing weight not a float), nothing written.");

static PyObject *
axpy_finite(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 1 + 2 * MAX_TARGETS || nargs % 2 == 0) {
        PyErr_SetString(PyExc_TypeError, "axpy_finite(x, w1, a1, ...) takes 1 to 4 pairs");
        return NULL;
    }
    Py_ssize_t m = (nargs - 1) / 2;
    PyObject *x = args[0];
    PyObject *ws[MAX_TARGETS];
    Step steps[MAX_TARGETS];
    for (Py_ssize_t p = 0; p < m; p++) {
        ws[p] = args[1 + 2 * p];
        if (!PyDict_CheckExact(ws[p]) ||
            !number_value(args[2 + 2 * p], &steps[p].v, &steps[p].iv, &steps[p].is_int)) {
            Py_RETURN_NONE;
        }
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double *values = PyMem_New(double, m * it.n + 1);
    if (values == NULL) {
        items_release(&it);
        return PyErr_NoMemory();
    }
    /* first every new value, then (all finite) every write */
    int result = 1;
    for (Py_ssize_t p = 0; p < m && result == 1; p++) {
        for (Py_ssize_t i = 0; i < it.n; i++) {
            Item *item = &it.items[i];
            PyObject *old = PyDict_GetItemWithError(ws[p], item->key);
            if (old == NULL && PyErr_Occurred()) {
                result = -1;
                break;
            }
            if (old != NULL && !PyFloat_CheckExact(old)) {
                result = 0; /* not handled: Python's own arithmetic */
                break;
            }
            double prod;
            if (steps[p].is_int && item->is_int && (steps[p].iv == 0 || item->iv == 0)) {
                prod = 0.0;
            }
            else {
                prod = steps[p].v * item->v;
            }
            double base = old == NULL ? 0.0 : PyFloat_AS_DOUBLE(old);
            double updated = base + prod;
            if (!isfinite(updated)) {
                result = 2; /* refused */
                break;
            }
            values[p * it.n + i] = updated;
        }
    }
    for (Py_ssize_t p = 0; p < m && result == 1; p++) {
        for (Py_ssize_t i = 0; i < it.n; i++) {
            PyObject *updated = PyFloat_FromDouble(values[p * it.n + i]);
            if (updated == NULL) {
                result = -1;
                break;
            }
            int failed = PyDict_SetItem(ws[p], it.items[i].key, updated);
            Py_DECREF(updated);
            if (failed) {
                result = -1;
                break;
            }
        }
    }
    PyMem_Free(values);
    items_release(&it);
    if (result < 0) {
        return NULL;
    }
    if (result == 0) {
        Py_RETURN_NONE;
    }
    if (result == 2) {
        Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* Whether the dict x holds exactly the objects of snap, in order. */
static int
same_items(PyObject *x, PyObject *snap)
{
    Py_ssize_t n = PyTuple_GET_SIZE(snap);
    if (!PyDict_CheckExact(x) || 2 * PyDict_GET_SIZE(x) != n) {
        return 0;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(x, &pos, &key, &value)) {
        if (i + 1 >= n || PyTuple_GET_ITEM(snap, i) != key ||
            PyTuple_GET_ITEM(snap, i + 1) != value) {
            return 0;
        }
        i += 2;
    }
    return i == n;
}

PyDoc_STRVAR(recall_doc,
"recall(memo, x, n_seen, /)\n"
"--\n"
"\n"
"The result a learner memorised when it predicted x, if still valid: ``result`` when memo is\n"
"a tuple ``(x, result, n_seen)`` with that very dict x (identity) and that n_seen, and\n"
"x holds the key and value objects of the snapshot that ends ``result`` (by\n"
"pointer identity, in order: a value replaced by an equal new object counts as a change; the\n"
"snapshot holds references, so no address can have been reused); None otherwise (memo may\n"
"be None).");

static PyObject *
recall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("recall", nargs, 3, 3) < 0) {
        return NULL;
    }
    PyObject *memo = args[0], *x = args[1], *n_seen = args[2];
    if (!PyTuple_CheckExact(memo) || PyTuple_GET_SIZE(memo) != 3 ||
        PyTuple_GET_ITEM(memo, 0) != x) {
        Py_RETURN_NONE;
    }
    PyObject *result = PyTuple_GET_ITEM(memo, 1);
    if (!PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) < 1) {
        Py_RETURN_NONE;
    }
    PyObject *snap = PyTuple_GET_ITEM(result, PyTuple_GET_SIZE(result) - 1);
    PyObject *then = PyTuple_GET_ITEM(memo, 2);
    if (!PyTuple_CheckExact(snap) || !PyLong_CheckExact(then) || !PyLong_CheckExact(n_seen)) {
        Py_RETURN_NONE;
    }
    int same = PyObject_RichCompareBool(then, n_seen, Py_EQ);
    if (same < 0) {
        return NULL;
    }
    if (!same || !same_items(x, snap)) {
        Py_RETURN_NONE;
    }
    return Py_NewRef(result);
}


PyDoc_STRVAR(avg_dot_norm_doc,
"avg_dot_norm(w, u, x, snapshot=False, /)\n"
"--\n"
"\n"
"Averaged binary perceptron: ``(udot, (dot, r))``, ``udot`` the sum of ``u[k] * v`` over\n"
"the items of x whose key is in w and in u (as ``Perceptron._average_score``), ``(dot, r)``\n"
"what :func:`dot_norm` gives; with snapshot true the inner tuple is ``(dot, r, snapshot)``,\n"
"for :func:`recall`. None when not handled (see :func:`dot_norm`; also an accumulator not\n"
"a float).");

static PyObject *
avg_dot_norm(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = kernel_begin("avg_dot_norm", args, nargs, 3, 4, 2, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *w = args[0], *u = args[1];
    double dot = 0.0, udot = 0.0;
    status = items_avg_dot(&it, w, u, &dot, &udot);
    if (status <= 0) {
        return release_unhandled(&it, status);
    }
    double r = items_norm(&it);
    PyObject *inner = pack_norm(&it, want_snapshot, PyFloat_FromDouble(dot), r);
    if (inner == NULL) {
        return NULL;
    }
    return pack(PyFloat_FromDouble(udot), inner, NULL);
}

PyDoc_STRVAR(avg_class_argmax_doc,
"avg_class_argmax(w, b, u, ub, t, x, snapshot=False, /)\n"
"--\n"
"\n"
"Averaged multi-class perceptron: ``(a_hat, (y_hat, r))``, ``a_hat`` the argmax of the\n"
"averaged scores ``s - (dot(u[c], x) + ub[c]) / t``, s the plain score (as\n"
"``_argmax(MulticlassPerceptron._average_scores(x))``; u and ub the accumulators per class,\n"
"t the divisor D(t), an int or a float >= 1) and ``(y_hat, r)`` what :func:`class_argmax` gives;\n"
"with snapshot true the inner tuple is ``(y_hat, r, snapshot)``. None when not handled.");

static PyObject *
avg_class_argmax(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    double t;
    int status = kernel_begin("avg_class_argmax", args, nargs, 6, 7, 4, &t, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *w = args[0], *b = args[1], *u = args[2], *ub = args[3];
    double r = items_norm(&it);
    PyObject *best = NULL, *abest = NULL;
    status = class_avg_scores(&it, w, b, u, ub, t, &best, &abest, NULL);
    if (status <= 0) {
        return release_unhandled(&it, status);
    }
    PyObject *inner = pack_norm(&it, want_snapshot, best, r);
    if (inner == NULL) {
        Py_DECREF(abest);
        return NULL;
    }
    return pack(abest, inner, NULL);
}

PyDoc_STRVAR(avg_class_scores_doc,
"avg_class_scores(w, b, u, ub, t, x, /)\n"
"--\n"
"\n"
"Averaged multi-class perceptron: the dict of averaged scores, exactly as\n"
"``MulticlassPerceptron._average_scores``. None when not handled.");

static PyObject *
avg_class_scores(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    double t;
    int status = kernel_begin("avg_class_scores", args, nargs, 6, 6, 4, &t, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *w = args[0], *b = args[1], *u = args[2], *ub = args[3];
    PyObject *scores = PyDict_New();
    if (scores == NULL) {
        return release_unhandled(&it, -1);
    }
    return scores_result(&it, class_avg_scores(&it, w, b, u, ub, t, NULL, NULL, scores), scores);
}

/* -- AvgCache: the averaged multi-class scores from arrays --------------------------------------
 *
 * avg_class_argmax looks every feature of x up twice per class (in w[c] and in u[c]). An
 * AvgCache keeps a dense copy of the model: one slot per feature key of any w[c] (a dict
 * feature -> slot), and per slot the weights of every class side by side (W[slot * nc + c])
 * and the accumulators likewise (U, 0.0 where w[c] has no weight for the feature: the
 * reference adds u[c][k] * v only when w[c] has k). A call looks x's keys up once (or not at
 * all: the keys of the last x, same objects in the same order, keep their slots) and folds
 * every class at once.
 *
 * Exactness: each class's dot and udot are left folds from +0.0 in x's order, as in
 * items_avg_dot; a feature a class lacks adds 0.0 * v, a zero, which changes no left fold
 * from +0.0 (such a fold is never -0.0), for finite v; so x's values must be finite here
 * (else not handled). Keys must be exact str or int, and so must the model's (no Python code
 * runs in a lookup), classes exact str or int or bool, weights, accumulators and biases exact
 * floats.
 *
 * Validity: the copy is checked against the model at every call with the dicts' version tags
 * (PEP 509: every change of a dict, in place or not, gives it a new tag; Python < 3.12; on
 * later versions a call is never handled): w and u (classes added or replaced: everything is
 * read again), b and ub (the biases are read again), and each w[c], u[c] (that class's row
 * is read again: after a mistake, the two classes it changed). The cache holds references to
 * every object it compared by identity, so no address can have been reused.
 */

#if PY_VERSION_HEX < 0x030C0000
#define AVG_CACHE_AVAILABLE 1
static inline uint64_t
dict_tag(PyObject *d)
{
    return ((PyDictObject *)d)->ma_version_tag;
}
#else
#define AVG_CACHE_AVAILABLE 0
static inline uint64_t
dict_tag(PyObject *d)
{
    (void)d; /* never called: every call declines first */
    return 0;
}
#endif

/* At most this many doubles in W (and in U): past it, the model is too large for a copy. */
#define AVG_CACHE_MAX_CELLS (1 << 20)

typedef struct {
    PyObject_HEAD
    int built;
    int too_large;      /* the last build stopped at AVG_CACHE_MAX_CELLS */
    PyObject *decl[4];  /* the dicts w, b, u, ub of the model last declined (or NULL) */
    uint64_t decl_max;  /* model_tag() then; UINT64_MAX: declined for good (too large) */
    PyObject *w, *b, *u, *ub; /* the model's dicts, or NULL */
    uint64_t tw, tb, tu, tub;
    Py_ssize_t nc;
    PyObject **cls, **wc, **uc; /* nc each, references */
    uint64_t *twc, *tuc;
    double *bias, *ubias, *dot, *udot; /* nc each */
    PyObject *index;                   /* feature -> slot */
    Py_ssize_t ns, scap;               /* slots used, slots allocated */
    double *W, *U;                     /* scap * nc each */
    PyObject **lk;                     /* the last x's keys (references or NULL), lcap */
    Py_ssize_t *ls;                    /* their slots (-1: in no w[c]) */
    Py_ssize_t lcap;
    Py_ssize_t *slots;                 /* scratch: the slots of x's items, lcap */
    double *vals;                      /* scratch: x's values, lcap */
} AvgCache;

static void
avg_cache_forget_keys(AvgCache *self)
{
    for (Py_ssize_t i = 0; i < self->lcap; i++) {
        Py_CLEAR(self->lk[i]);
    }
}

static void
avg_cache_clear(AvgCache *self)
{
    self->built = 0;
    Py_CLEAR(self->w);
    Py_CLEAR(self->b);
    Py_CLEAR(self->u);
    Py_CLEAR(self->ub);
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        Py_CLEAR(self->cls[c]);
        Py_CLEAR(self->wc[c]);
        Py_CLEAR(self->uc[c]);
    }
    PyMem_Free(self->cls);
    PyMem_Free(self->wc);
    PyMem_Free(self->uc);
    PyMem_Free(self->twc);
    PyMem_Free(self->tuc);
    PyMem_Free(self->bias);
    PyMem_Free(self->ubias);
    PyMem_Free(self->dot);
    PyMem_Free(self->udot);
    PyMem_Free(self->W);
    PyMem_Free(self->U);
    self->cls = self->wc = self->uc = NULL;
    self->twc = self->tuc = NULL;
    self->bias = self->ubias = self->dot = self->udot = self->W = self->U = NULL;
    self->nc = self->ns = self->scap = 0;
    Py_CLEAR(self->index);
    avg_cache_forget_keys(self);
}

static int
plain_key(PyObject *key)
{
    return PyUnicode_CheckExact(key) || PyLong_CheckExact(key);
}

/* The slot of a feature key of w[c], added when new. >= 0; -1: error set; -2: not handled. */
static Py_ssize_t
avg_cache_slot(AvgCache *self, PyObject *key)
{
    if (!plain_key(key)) {
        return -2;
    }
    PyObject *got = PyDict_GetItemWithError(self->index, key);
    if (got != NULL) {
        return PyLong_AsSsize_t(got);
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t s = self->ns;
    if ((s + 1) * self->nc > AVG_CACHE_MAX_CELLS) {
        self->too_large = 1;
        return -2;
    }
    if (s == self->scap) {
        Py_ssize_t cap = self->scap ? 2 * self->scap : 32;
        double *W = PyMem_Realloc(self->W, (size_t)(cap * self->nc) * sizeof(double));
        if (W == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->W = W;
        double *U = PyMem_Realloc(self->U, (size_t)(cap * self->nc) * sizeof(double));
        if (U == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->U = U;
        self->scap = cap;
    }
    PyObject *slot = PyLong_FromSsize_t(s);
    if (slot == NULL || PyDict_SetItem(self->index, key, slot) < 0) {
        Py_XDECREF(slot);
        return -1;
    }
    Py_DECREF(slot);
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        self->W[s * self->nc + c] = 0.0;
        self->U[s * self->nc + c] = 0.0;
    }
    self->ns = s + 1;
    avg_cache_forget_keys(self); /* a key of an x seen before may have a slot now */
    return s;
}

/* Read class c's weights and accumulators into its column. 1: done; 0: not handled; -1. */
static int
avg_cache_read_class(AvgCache *self, Py_ssize_t c)
{
    Py_ssize_t nc = self->nc;
    PyObject *wc = self->wc[c], *uc = self->uc[c];
    /* the tags before reading: a change while reading (a finaliser run by an allocation)
     * shows at the next call */
    self->twc[c] = dict_tag(wc);
    self->tuc[c] = dict_tag(uc);
    for (Py_ssize_t s = 0; s < self->ns; s++) {
        self->W[s * nc + c] = 0.0;
        self->U[s * nc + c] = 0.0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(wc, &pos, &key, &value)) {
        if (!PyFloat_CheckExact(value)) {
            return 0;
        }
        double wv = PyFloat_AS_DOUBLE(value);
        Py_INCREF(key); /* avg_cache_slot allocates */
        Py_ssize_t s = avg_cache_slot(self, key);
        Py_DECREF(key);
        if (s < 0) {
            return s == -1 ? -1 : 0;
        }
        self->W[s * nc + c] = wv;
    }
    pos = 0;
    while (PyDict_Next(uc, &pos, &key, &value)) {
        if (!plain_key(key)) {
            return 0;
        }
        PyObject *wk = PyDict_GetItemWithError(wc, key);
        if (wk == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            continue; /* u[c][k] counts only where w[c] has k */
        }
        if (!PyFloat_CheckExact(value)) {
            return 0;
        }
        PyObject *slot = PyDict_GetItemWithError(self->index, key);
        if (slot == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        self->U[PyLong_AsSsize_t(slot) * nc + c] = PyFloat_AS_DOUBLE(value);
    }
    return 1;
}

static int
avg_cache_read_biases(AvgCache *self)
{
    self->tb = dict_tag(self->b);
    self->tub = dict_tag(self->ub);
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        PyObject *bc = PyDict_GetItemWithError(self->b, self->cls[c]);
        PyObject *ubc = bc == NULL ? NULL : PyDict_GetItemWithError(self->ub, self->cls[c]);
        if (ubc == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        if (!PyFloat_CheckExact(bc) || !PyFloat_CheckExact(ubc)) {
            return 0;
        }
        self->bias[c] = PyFloat_AS_DOUBLE(bc);
        self->ubias[c] = PyFloat_AS_DOUBLE(ubc);
    }
    return 1;
}

/* Everything read again from the model's dicts. 1: done; 0: not handled; -1: error. */
static int
avg_cache_build(AvgCache *self, PyObject *w, PyObject *b, PyObject *u, PyObject *ub)
{
    avg_cache_clear(self);
    Py_ssize_t nc = PyDict_GET_SIZE(w);
    self->w = Py_NewRef(w);
    self->b = Py_NewRef(b);
    self->u = Py_NewRef(u);
    self->ub = Py_NewRef(ub);
    self->index = PyDict_New();
    Py_ssize_t m = nc > 0 ? nc : 1;
    self->cls = PyMem_Calloc(m, sizeof(PyObject *));
    self->wc = PyMem_Calloc(m, sizeof(PyObject *));
    self->uc = PyMem_Calloc(m, sizeof(PyObject *));
    self->twc = PyMem_Calloc(m, sizeof(uint64_t));
    self->tuc = PyMem_Calloc(m, sizeof(uint64_t));
    self->bias = PyMem_Calloc(m, sizeof(double));
    self->ubias = PyMem_Calloc(m, sizeof(double));
    self->dot = PyMem_Calloc(m, sizeof(double));
    self->udot = PyMem_Calloc(m, sizeof(double));
    if (self->index == NULL || !self->cls || !self->wc || !self->uc || !self->twc ||
        !self->tuc || !self->bias || !self->ubias || !self->dot || !self->udot) {
        avg_cache_clear(self);
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return -1;
    }
    self->tw = dict_tag(w);
    self->tu = dict_tag(u);
    Py_ssize_t pos = 0;
    PyObject *c, *wc;
    while (PyDict_Next(w, &pos, &c, &wc)) {
        if (self->nc >= nc || !(plain_key(c) || PyBool_Check(c)) || !PyDict_CheckExact(wc)) {
            avg_cache_clear(self);
            return 0;
        }
        PyObject *uc = PyDict_GetItemWithError(u, c);
        if (uc == NULL || !PyDict_CheckExact(uc)) {
            int err = PyErr_Occurred() != NULL;
            avg_cache_clear(self);
            return err ? -1 : 0;
        }
        self->cls[self->nc] = Py_NewRef(c);
        self->wc[self->nc] = Py_NewRef(wc);
        self->uc[self->nc] = Py_NewRef(uc);
        self->nc++;
    }
    int status = avg_cache_read_biases(self);
    for (Py_ssize_t k = 0; status == 1 && k < self->nc; k++) {
        status = avg_cache_read_class(self, k);
    }
    if (status != 1) {
        avg_cache_clear(self);
        return status;
    }
    self->built = 1;
    return 1;
}

/* The largest version tag of the model's dicts w, b, u, ub and w's class dicts: any change
 * of one of them gives it a tag larger than every tag before (PEP 509). */
static uint64_t
model_tag(PyObject *w, PyObject *b, PyObject *u, PyObject *ub)
{
    uint64_t m = dict_tag(w);
    PyObject *ds[3] = {b, u, ub};
    for (int k = 0; k < 3; k++) {
        m = dict_tag(ds[k]) > m ? dict_tag(ds[k]) : m;
    }
    Py_ssize_t pos = 0;
    PyObject *c, *wc;
    while (PyDict_Next(w, &pos, &c, &wc)) {
        if (PyDict_CheckExact(wc) && dict_tag(wc) > m) {
            m = dict_tag(wc);
        }
    }
    return m;
}

/* A model the copy declined (a key or weight of a type it does not take, or too large) is
 * not read again at every call: only once one of its dicts changed (never, when too large,
 * while the model's dicts are the same objects). Not reading it again is always exact: the
 * caller then runs the module's kernels. */
static int
avg_cache_still_declined(AvgCache *self, PyObject *w, PyObject *b, PyObject *u, PyObject *ub)
{
    if (self->decl[0] != w || self->decl[1] != b || self->decl[2] != u || self->decl[3] != ub) {
        return 0;
    }
    return self->decl_max == UINT64_MAX || model_tag(w, b, u, ub) == self->decl_max;
}

static void
avg_cache_note_declined(AvgCache *self, PyObject *w, PyObject *b, PyObject *u, PyObject *ub)
{
    PyObject *ds[4] = {w, b, u, ub};
    for (int k = 0; k < 4; k++) {
        Py_XSETREF(self->decl[k], Py_NewRef(ds[k]));
    }
    self->decl_max = self->too_large ? UINT64_MAX : model_tag(w, b, u, ub);
}

/* The copy brought up to date with the model. 1: done; 0: not handled (the copy dropped);
 * -1: error (dropped). */
static int
avg_cache_sync(AvgCache *self, PyObject *w, PyObject *b, PyObject *u, PyObject *ub)
{
    if (!self->built || self->w != w || self->b != b || self->u != u || self->ub != ub ||
        dict_tag(w) != self->tw || dict_tag(u) != self->tu) {
        return avg_cache_build(self, w, b, u, ub);
    }
    int status = 1;
    if (dict_tag(b) != self->tb || dict_tag(ub) != self->tub) {
        status = avg_cache_read_biases(self);
    }
    for (Py_ssize_t c = 0; status == 1 && c < self->nc; c++) {
        if (dict_tag(self->wc[c]) != self->twc[c] || dict_tag(self->uc[c]) != self->tuc[c]) {
            status = avg_cache_read_class(self, c);
        }
    }
    if (status != 1) {
        avg_cache_clear(self);
    }
    return status;
}

/* x's values into self->vals and slots into self->slots (in x's order), *sq the norm's sum
 * of squares. 1: done; 0: not handled; -1: error. */
static int
avg_cache_load_x(AvgCache *self, PyObject *x, double *sq)
{
    Py_ssize_t n = PyDict_GET_SIZE(x);
    if (n > self->lcap) {
        Py_ssize_t cap = n > 2 * self->lcap ? n : 2 * self->lcap;
        PyObject **lk = PyMem_Calloc(cap, sizeof(PyObject *));
        Py_ssize_t *ls = PyMem_Calloc(cap, sizeof(Py_ssize_t));
        Py_ssize_t *slots = PyMem_Calloc(cap, sizeof(Py_ssize_t));
        double *vals = PyMem_Calloc(cap, sizeof(double));
        if (!lk || !ls || !slots || !vals) {
            PyMem_Free(lk);
            PyMem_Free(ls);
            PyMem_Free(slots);
            PyMem_Free(vals);
            PyErr_NoMemory();
            return -1;
        }
        avg_cache_forget_keys(self);
        PyMem_Free(self->lk);
        PyMem_Free(self->ls);
        PyMem_Free(self->slots);
        PyMem_Free(self->vals);
        self->lk = lk;
        self->ls = ls;
        self->slots = slots;
        self->vals = vals;
        self->lcap = cap;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    double acc = 0.0;
    while (PyDict_Next(x, &pos, &key, &value)) {
        double v;
        long long iv;
        int is_int;
        if (i >= n || !number_value(value, &v, &iv, &is_int) || !isfinite(v)) {
            return 0;
        }
        Py_ssize_t s;
        if (self->lk[i] == key) {
            s = self->ls[i];
        }
        else {
            if (!plain_key(key)) {
                return 0;
            }
            PyObject *got = PyDict_GetItemWithError(self->index, key);
            if (got == NULL && PyErr_Occurred()) {
                return -1;
            }
            s = got == NULL ? -1 : PyLong_AsSsize_t(got);
            Py_XSETREF(self->lk[i], Py_NewRef(key));
            self->ls[i] = s;
        }
        self->slots[i] = s;
        self->vals[i] = v;
        acc += v * v;
        i++;
    }
    *sq = acc;
    return 1;
}

/* A call's prologue and the folds: args checked, the copy brought up to date, x loaded,
 * self->dot and self->udot filled, *t the divisor, *sq R's sum of squares; with
 * *want_snapshot, *snap the tuple (k0, v0, k1, v1, ...) of x's items, taken right before
 * they are read (no allocation between the two). 1: done; 0: not handled; -1: error (*snap
 * NULL unless 1). */
static int
avg_cache_fold(AvgCache *self, const char *name, PyObject *const *args, Py_ssize_t nargs,
               Py_ssize_t high, int *want_snapshot, double *t, double *sq, PyObject **snap)
{
    *snap = NULL;
    if (check_nargs(name, nargs, 6, high) < 0) {
        return -1;
    }
    *want_snapshot = 0;
    if (nargs > 6 && (*want_snapshot = PyObject_IsTrue(args[6])) < 0) {
        return -1;
    }
#if !AVG_CACHE_AVAILABLE
    return 0;
#else
    PyObject *w = args[0], *b = args[1], *u = args[2], *ub = args[3], *x = args[5];
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(b) || !PyDict_CheckExact(u) ||
        !PyDict_CheckExact(ub) || !PyDict_CheckExact(x) || !count_value(args[4], t)) {
        return 0;
    }
    if (self->decl[0] != NULL) {
        if (avg_cache_still_declined(self, w, b, u, ub)) {
            return 0;
        }
        for (int k = 0; k < 4; k++) {
            Py_CLEAR(self->decl[k]);
        }
    }
    Py_ssize_t n = PyDict_GET_SIZE(x);
    if (*want_snapshot && (*snap = PyTuple_New(2 * n)) == NULL) {
        return -1;
    }
    self->too_large = 0;
    int status = avg_cache_sync(self, w, b, u, ub);
    if (status == 0) {
        avg_cache_note_declined(self, w, b, u, ub);
    }
    if (status == 1 && PyDict_GET_SIZE(x) != n) {
        status = 0; /* x changed while the model was read (a finaliser): not handled */
    }
    if (status == 1 && *snap != NULL) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *key, *value;
        while (i < n && PyDict_Next(x, &pos, &key, &value)) {
            PyTuple_SET_ITEM(*snap, 2 * i, Py_NewRef(key));
            PyTuple_SET_ITEM(*snap, 2 * i + 1, Py_NewRef(value));
            i++;
        }
    }
    if (status == 1) {
        status = avg_cache_load_x(self, x, sq);
    }
    if (status <= 0) {
        Py_CLEAR(*snap);
        return status;
    }
    Py_ssize_t nc = self->nc;
    double *dot = self->dot, *udot = self->udot;
    for (Py_ssize_t c = 0; c < nc; c++) {
        dot[c] = 0.0;
        udot[c] = 0.0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t s = self->slots[i];
        if (s < 0) {
            continue; /* in no w[c] */
        }
        double v = self->vals[i];
        const double *wrow = self->W + s * nc, *urow = self->U + s * nc;
        for (Py_ssize_t c = 0; c < nc; c++) {
            dot[c] += wrow[c] * v;
            udot[c] += urow[c] * v;
        }
    }
    return 1;
#endif
}

PyDoc_STRVAR(avg_cache_argmax_doc,
"avg_class_argmax(w, b, u, ub, t, x, snapshot=False, /)\n"
"--\n"
"\n"
"What the module's :func:`avg_class_argmax` gives, to the last bit, computed from the\n"
"cache's copy of the model (made or brought up to date first). None when not handled: as\n"
"the module's function, and also a key or class of another type than str or int (bool for\n"
"classes), a value of x that is not finite, a model of more than 2**20 weights, or Python\n"
"3.12 and later.");

static PyObject *
avg_cache_argmax(AvgCache *self, PyObject *const *args, Py_ssize_t nargs)
{
    int want_snapshot;
    double t, sq;
    PyObject *snap;
    int status = avg_cache_fold(self, "avg_class_argmax", args, nargs, 7, &want_snapshot, &t,
                                &sq, &snap);
    if (status <= 0) {
        return unhandled(status);
    }
    Py_ssize_t nc = self->nc;
    const double *dot = self->dot, *udot = self->udot;
    Py_ssize_t best = -1, abest = -1;
    double best_score = -INFINITY, abest_score = -INFINITY;
    for (Py_ssize_t c = 0; c < nc; c++) {
        double s = dot[c] + self->bias[c];
        double as = s - (udot[c] + self->ubias[c]) / t;
        if (best < 0 || s > best_score) {
            best = c;
            best_score = s;
        }
        if (abest < 0 || as > abest_score) {
            abest = c;
            abest_score = as;
        }
    }
    PyObject *y_hat = Py_NewRef(best < 0 ? Py_None : self->cls[best]);
    PyObject *a_hat = Py_NewRef(abest < 0 ? Py_None : self->cls[abest]);
    PyObject *inner = pack(y_hat, PyFloat_FromDouble(sqrt(sq)), snap);
    if (inner == NULL) {
        Py_DECREF(a_hat);
        return NULL;
    }
    return pack(a_hat, inner, NULL);
}

PyDoc_STRVAR(avg_cache_scores_doc,
"avg_class_scores(w, b, u, ub, t, x, /)\n"
"--\n"
"\n"
"What the module's :func:`avg_class_scores` gives (the dict of averaged scores), from the\n"
"cache's copy of the model. None when not handled (see :meth:`avg_class_argmax`).");

static PyObject *
avg_cache_scores(AvgCache *self, PyObject *const *args, Py_ssize_t nargs)
{
    int want_snapshot;
    double t, sq;
    PyObject *snap;
    int status = avg_cache_fold(self, "avg_class_scores", args, nargs, 6, &want_snapshot, &t,
                                &sq, &snap);
    if (status <= 0) {
        return unhandled(status);
    }
    PyObject *scores = PyDict_New();
    if (scores == NULL) {
        return NULL;
    }
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        double as = (self->dot[c] + self->bias[c]) - (self->udot[c] + self->ubias[c]) / t;
        PyObject *value = PyFloat_FromDouble(as);
        if (value == NULL || PyDict_SetItem(scores, self->cls[c], value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(scores);
            return NULL;
        }
        Py_DECREF(value);
    }
    return scores;
}

static int
avg_cache_traverse(AvgCache *self, visitproc visit, void *arg)
{
    Py_VISIT(self->w);
    Py_VISIT(self->b);
    Py_VISIT(self->u);
    Py_VISIT(self->ub);
    Py_VISIT(self->index);
    for (int k = 0; k < 4; k++) {
        Py_VISIT(self->decl[k]);
    }
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        Py_VISIT(self->cls[c]);
        Py_VISIT(self->wc[c]);
        Py_VISIT(self->uc[c]);
    }
    for (Py_ssize_t i = 0; i < self->lcap; i++) {
        Py_VISIT(self->lk[i]);
    }
    return 0;
}

static int
avg_cache_tp_clear(AvgCache *self)
{
    avg_cache_clear(self);
    for (int k = 0; k < 4; k++) {
        Py_CLEAR(self->decl[k]);
    }
    return 0;
}

static void
avg_cache_dealloc(AvgCache *self)
{
    PyObject_GC_UnTrack(self);
    avg_cache_tp_clear(self);
    PyMem_Free(self->lk);
    PyMem_Free(self->ls);
    PyMem_Free(self->slots);
    PyMem_Free(self->vals);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef avg_cache_methods[] = {
    {"avg_class_argmax", (PyCFunction)(void (*)(void))avg_cache_argmax, METH_FASTCALL,
     avg_cache_argmax_doc},
    {"avg_class_scores", (PyCFunction)(void (*)(void))avg_cache_scores, METH_FASTCALL,
     avg_cache_scores_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(avg_cache_doc,
"AvgCache()\n"
"--\n"
"\n"
"A dense copy of an averaged multi-class model's weights, accumulators and biases, for\n"
"its :meth:`avg_class_argmax`; checked against the model's dicts at every call and read\n"
"again where they changed. A model it declined is tried again only once one of its dicts\n"
"changed (a model too large: not while its dicts are the same objects). Never saved: a\n"
"learner makes a new one when it needs one.");

static PyTypeObject AvgCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stream_perceptron._speedups.AvgCache",
    .tp_basicsize = sizeof(AvgCache),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = avg_cache_doc,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)avg_cache_dealloc,
    .tp_traverse = (traverseproc)avg_cache_traverse,
    .tp_clear = (inquiry)avg_cache_tp_clear,
    .tp_methods = avg_cache_methods,
};

static PyMethodDef speedups_methods[] = {
    {"dot_norm", (PyCFunction)(void (*)(void))dot_norm, METH_FASTCALL, dot_norm_doc},
    {"class_argmax", (PyCFunction)(void (*)(void))class_argmax, METH_FASTCALL,
     class_argmax_doc},
    {"class_scores", (PyCFunction)(void (*)(void))class_scores_py, METH_FASTCALL,
     class_scores_doc},
    {"axpy", (PyCFunction)(void (*)(void))axpy, METH_FASTCALL, axpy_doc},
    {"axpy_finite", (PyCFunction)(void (*)(void))axpy_finite, METH_FASTCALL,
     axpy_finite_doc},
    {"recall", (PyCFunction)(void (*)(void))recall, METH_FASTCALL, recall_doc},
    {"avg_dot_norm", (PyCFunction)(void (*)(void))avg_dot_norm, METH_FASTCALL,
     avg_dot_norm_doc},
    {"avg_class_argmax", (PyCFunction)(void (*)(void))avg_class_argmax, METH_FASTCALL,
     avg_class_argmax_doc},
    {"avg_class_scores", (PyCFunction)(void (*)(void))avg_class_scores, METH_FASTCALL,
     avg_class_scores_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(module_doc,
"Exact C kernels of the learners' dict API (optional; the learners fall back to Python).\n"
"\n"
"Each kernel reproduces the pure-Python loop it replaces to the last bit, and returns None\n"
"(axpy: False) without changing anything when its input is outside what it handles.");

static int
speedups_exec(PyObject *module)
{
    if (PyType_Ready(&AvgCacheType) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "AvgCache", (PyObject *)&AvgCacheType);
}

static PyModuleDef_Slot speedups_slots[] = {
    {Py_mod_exec, speedups_exec},
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "stream_perceptron._speedups",
    module_doc,
    0,
    speedups_methods,
    speedups_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
