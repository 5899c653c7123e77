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
#include <stddef.h>
#include <math.h>
#include <string.h>

#include "_rules.h" /* the learning rules, once (the blocks' too: _dense.c) */

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
items_sq(Items *it)
{
    double sq = 0.0;
    for (Py_ssize_t i = 0; i < it->n; i++) {
        sq += it->items[i].v * it->items[i].v;
    }
    return sq;
}

static double
items_norm(Items *it)
{
    return sqrt(items_sq(it));
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

/* kernel_begin for a kernel of (w, x[, snapshot]), then x's dot with w: 1 with *dot set and the
 * items held (release them); otherwise the unhandled status, nothing held. */
static int
begin_dot(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t high, Items *it,
          int *want_snapshot, double *dot)
{
    int status = kernel_begin(name, args, nargs, 2, high, 1, NULL, it, want_snapshot);
    if (status <= 0) {
        return status;
    }
    *dot = 0.0;
    status = items_dot(it, args[0], dot);
    if (status <= 0) {
        items_release(it);
    }
    return status;
}

static PyObject *
dot_norm(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    double dot;
    int status = begin_dot("dot_norm", args, nargs, 3, &it, &want_snapshot, &dot);
    if (status <= 0) {
        return unhandled(status);
    }
    return pack_norm(&it, want_snapshot, PyFloat_FromDouble(dot), items_norm(&it));
}

PyDoc_STRVAR(dot_sq_doc,
"dot_sq(w, x, /)\n"
"--\n"
"\n"
"The passive-aggressive learner's fold (``passive_aggressive._sq_dot``): ``(sq, dot)``, ``sq``\n"
"the sum of ``v * v`` over all items of x and ``dot`` the sum of ``w[k] * v`` over the items\n"
"whose key is in w, both accumulated from 0.0 in x's order. None when not handled (see\n"
":func:`dot_norm`).");

static PyObject *
dot_sq(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    double dot;
    int status = begin_dot("dot_sq", args, nargs, 2, &it, &want_snapshot, &dot);
    if (status <= 0) {
        return unhandled(status);
    }
    double sq = items_sq(&it);
    items_release(&it);
    return pack(PyFloat_FromDouble(sq), PyFloat_FromDouble(dot), NULL);
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

/* -- ClassStore: the averaged multi-class model in native arrays --------------------------------
 *
 * The state of an averaged MulticlassPerceptron while it learns through the dict API: not a
 * copy of its dicts, the model itself (the learner holds either its dicts or a store, never
 * both; its dicts are built from the store when asked for, see learners/multiclass.py).
 *
 * A feature index (a dict: feature key -> slot) and, per slot, the weights of every class side
 * by side (W[slot * ccap + c]), the averaging accumulators likewise (U), and a presence byte
 * (P: bit 1 the class's weight dict has the key, bit 2 its accumulator dict has it); per class
 * the bias and the averaging bias, and the slots in the order its two dicts got their keys
 * (so the dicts built from a store are the dicts the pure-Python code would hold, key order
 * included). Scoring an example is one index lookup per feature and one pass over the class
 * rows of its slot; an update writes the two classes' cells.
 *
 * Exactness: every dot is a left fold from +0.0 in x's order over the features the class's
 * dict has (presence checked, as the reference's `wc.get(k)`), every update is the
 * reference's `d.get(k, 0.0) + a * v` with Python's number semantics (an int step times an
 * int value is an exact int, whose zero is +0.0). Feature keys must be exact str or int (no
 * Python code runs in a lookup, and no two such keys of different types are equal, so one
 * index serves every class's dict), values of x floats or ints of at most 2**53 in magnitude,
 * weights, accumulators and biases floats; anything else is not handled (None) and nothing
 * changes.
 */

#define STORE_MAX_CELLS (1 << 22) /* slots x class capacity: past it, not handled */

typedef struct {
    Py_ssize_t *v;
    Py_ssize_t n, cap;
} SlotList;

typedef struct {
    PyObject_HEAD
    PyObject *index;   /* dict: feature key -> slot */
    PyObject *keys;    /* list: slot -> feature key */
    PyObject *classes; /* dict: label -> row, in the order first seen */
    PyObject *labels;  /* list: row -> label */
    Py_ssize_t nf, fcap;
    Py_ssize_t nc, ccap;
    double *W, *U;       /* fcap * ccap */
    unsigned char *P;    /* fcap * ccap */
    double *B, *UB;      /* ccap */
    double *dot, *udot;  /* ccap: scratch */
    SlotList *wo, *uo;   /* ccap */
    Py_ssize_t *slots;   /* scratch: the slots of x's items (-1: none yet) */
    double *vals;        /* scratch: new values of an update */
    Py_ssize_t scap, vcap;
    char *rbuf;          /* scratch of a rule's row of up to rcap items (store_rule_room) */
    Py_ssize_t rcap;
    PyObject **lk;       /* scap: the keys last found at each position of x (references) */
    Py_ssize_t *ls;      /* scap: their slots (a key's slot never changes) */
    int u_alone;         /* an accumulator whose class has no weight for its key (loaded) */
    unsigned long long version; /* bumped by every change of the weights (BinaryCore's memo) */
} ClassStore;

#define IN_W RULE_W
#define IN_U RULE_U

static int
plain_key(PyObject *key)
{
    return PyUnicode_CheckExact(key) || PyLong_CheckExact(key);
}

static int
slot_list_append(SlotList *l, Py_ssize_t s)
{
    if (l->n == l->cap) {
        Py_ssize_t cap = l->cap ? 2 * l->cap : 8;
        Py_ssize_t *v = PyMem_Realloc(l->v, (size_t)cap * sizeof(Py_ssize_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

/* Room for nf slots and nc classes. 1: done; 0: too large (nothing changed); -1: error. */
static int
store_reserve(ClassStore *self, Py_ssize_t nf, Py_ssize_t nc)
{
    if (nf <= self->fcap && nc <= self->ccap) {
        return 1;
    }
    Py_ssize_t fcap = self->fcap, ccap = self->ccap;
    if (nf > fcap) {
        fcap = fcap ? fcap : 16;
        while (fcap < nf) {
            fcap *= 2;
        }
    }
    if (nc > ccap) {
        ccap = ccap ? ccap : 4;
        while (ccap < nc) {
            ccap *= 2;
        }
    }
    if (nf * ccap > STORE_MAX_CELLS || nc > STORE_MAX_CELLS) {
        return 0;
    }
    if (fcap * ccap > STORE_MAX_CELLS) { /* the doubling would pass it: just what is needed */
        fcap = nf;
    }
    if (ccap != self->ccap) {
        size_t n = (size_t)ccap;
        double *p;
        double **arrays[4] = {&self->B, &self->UB, &self->dot, &self->udot};
        for (int k = 0; k < 4; k++) {
            p = PyMem_Realloc(*arrays[k], n * sizeof(double));
            if (p == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            *arrays[k] = p;
        }
        SlotList **lists[2] = {&self->wo, &self->uo};
        for (int k = 0; k < 2; k++) {
            SlotList *l = PyMem_Realloc(*lists[k], n * sizeof(SlotList));
            if (l == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            for (Py_ssize_t c = self->ccap; c < ccap; c++) {
                l[c].v = NULL;
                l[c].n = l[c].cap = 0;
            }
            *lists[k] = l;
        }
    }
    size_t cells = (size_t)fcap * (size_t)ccap;
    double *W = PyMem_Calloc(cells, sizeof(double));
    double *U = PyMem_Calloc(cells, sizeof(double));
    unsigned char *P = PyMem_Calloc(cells, 1);
    if (W == NULL || U == NULL || P == NULL) {
        PyMem_Free(W);
        PyMem_Free(U);
        PyMem_Free(P);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t s = 0; s < self->nf; s++) {
        memcpy(W + s * ccap, self->W + s * self->ccap, (size_t)self->nc * sizeof(double));
        memcpy(U + s * ccap, self->U + s * self->ccap, (size_t)self->nc * sizeof(double));
        memcpy(P + s * ccap, self->P + s * self->ccap, (size_t)self->nc);
    }
    PyMem_Free(self->W);
    PyMem_Free(self->U);
    PyMem_Free(self->P);
    self->W = W;
    self->U = U;
    self->P = P;
    self->fcap = fcap;
    self->ccap = ccap;
    return 1;
}

/* A new class row (zeros, empty dicts) for label. 1: done; 0: too large; -1: error. */
static int
store_add_class(ClassStore *self, PyObject *label)
{
    int status = store_reserve(self, self->nf, self->nc + 1);
    if (status <= 0) {
        return status;
    }
    Py_ssize_t c = self->nc;
    PyObject *row = PyLong_FromSsize_t(c);
    if (row == NULL || PyDict_SetItem(self->classes, label, row) < 0) {
        Py_XDECREF(row);
        return -1;
    }
    Py_DECREF(row);
    if (PyList_Append(self->labels, label) < 0) {
        PyDict_DelItem(self->classes, label);
        return -1;
    }
    self->B[c] = self->UB[c] = 0.0;
    self->wo[c].n = self->uo[c].n = 0;
    self->nc = c + 1;
    return 1;
}

/* The slot of a feature key, added when new. >= 0: the slot; -1: error; -2: too large. */
static Py_ssize_t
store_add_slot(ClassStore *self, PyObject *key)
{
    PyObject *got = PyDict_GetItemWithError(self->index, key);
    if (got != NULL) {
        return PyLong_AsSsize_t(got);
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    int status = store_reserve(self, self->nf + 1, self->nc);
    if (status <= 0) {
        return status == 0 ? -2 : -1;
    }
    Py_ssize_t s = self->nf;
    PyObject *slot = PyLong_FromSsize_t(s);
    if (slot == NULL || PyDict_SetItem(self->index, key, slot) < 0) {
        Py_XDECREF(slot);
        return -1;
    }
    Py_DECREF(slot);
    if (PyList_Append(self->keys, key) < 0) {
        PyDict_DelItem(self->index, key);
        return -1;
    }
    self->nf = s + 1;
    return s;
}

/* The slots of x's items into self->slots (-1: a key no class has). 1: done; 0: not handled
 * (a key neither an exact str nor an exact int); -1: error. */
static int
store_slots(ClassStore *self, Items *it)
{
    if (it->n > self->scap) {
        Py_ssize_t cap = it->n > 2 * self->scap ? it->n : 2 * self->scap;
        Py_ssize_t *slots = PyMem_Calloc((size_t)cap, sizeof(Py_ssize_t));
        Py_ssize_t *ls = PyMem_Calloc((size_t)cap, sizeof(Py_ssize_t));
        PyObject **lk = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
        if (slots == NULL || ls == NULL || lk == NULL) {
            PyMem_Free(slots);
            PyMem_Free(ls);
            PyMem_Free(lk);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < self->scap; i++) {
            lk[i] = self->lk[i]; /* the references move */
            ls[i] = self->ls[i];
        }
        PyMem_Free(self->slots);
        PyMem_Free(self->ls);
        PyMem_Free(self->lk);
        self->slots = slots;
        self->ls = ls;
        self->lk = lk;
        self->scap = cap;
    }
    for (Py_ssize_t i = 0; i < it->n; i++) {
        PyObject *key = it->items[i].key;
        if (key == self->lk[i]) { /* the same object as last time here: its slot */
            self->slots[i] = self->ls[i];
            continue;
        }
        if (!plain_key(key)) {
            return 0;
        }
        PyObject *got = PyDict_GetItemWithError(self->index, key);
        if (got == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            self->slots[i] = -1; /* not remembered: the key may get a slot */
        }
        else {
            Py_ssize_t s = PyLong_AsSsize_t(got);
            self->slots[i] = s;
            Py_XSETREF(self->lk[i], Py_NewRef(key));
            self->ls[i] = s;
        }
    }
    return 1;
}

/* store_fold compiled twice on x86-64 with GCC or clang, for CPUs with AVX2 and for the others,
 * the loader picking one (ifunc): four classes an instruction instead of two. The same IEEE
 * multiplications and additions either way (no FMA: -ffp-contract=off, and AVX2 does not bring
 * it), so the same sums to the last bit. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__linux__)
#define FOLD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FOLD_CLONES
#endif

/* store_fold's dense case for a store of nc <= 12 classes, nc and averaged constants: one pass
 * over x's items, every class's sum (and accumulator's sum) in registers the whole time, every
 * class's sums independent of the others' (a short dependency chain each: 2 us -> about 25 ns
 * for 10 classes of 20 features, measured as the difference it made). Each sum is its class's
 * left fold from +0.0 in x's order, as everywhere. */
static inline __attribute__((always_inline)) void
store_fold_fixed(ClassStore *self, const Items *it, const int averaged, const Py_ssize_t nc)
{
    const Py_ssize_t ccap = self->ccap, n = it->n;
    const Py_ssize_t *restrict slots = self->slots;
    const double *restrict W = self->W, *restrict U = self->U;
    double acc[12], uacc[12];
    for (Py_ssize_t c = 0; c < nc; c++) {
        acc[c] = 0.0;
        uacc[c] = 0.0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t s = slots[i];
        if (s < 0) {
            continue;
        }
        double v = it->items[i].v;
        const double *wr = W + s * ccap;
        for (Py_ssize_t c = 0; c < nc; c++) {
            acc[c] += wr[c] * v;
        }
        if (averaged) {
            const double *ur = U + s * ccap;
            for (Py_ssize_t c = 0; c < nc; c++) {
                uacc[c] += ur[c] * v;
            }
        }
    }
    for (Py_ssize_t c = 0; c < nc; c++) {
        self->dot[c] = acc[c];
        if (averaged) {
            self->udot[c] = uacc[c];
        }
    }
}

/* store_fold's dense case: four classes at a time, their sums (and, averaged, their
 * accumulators' sums) kept in registers over all of x's items, then one class at a time for
 * the classes left; each sum is its class's own left fold from +0.0 in x's order, as in the
 * loop over the items first (which kept the sums in memory: a load and a store an item and a
 * class). Always inlined with averaged a constant. */
static inline __attribute__((always_inline)) void
store_fold_dense(ClassStore *self, const Items *it, const int averaged)
{
    const Py_ssize_t nc = self->nc, ccap = self->ccap, n = it->n;
    const Py_ssize_t *restrict slots = self->slots;
    const double *restrict W = self->W, *restrict U = self->U;
    double *restrict dot = self->dot, *restrict udot = self->udot;
    Py_ssize_t c0 = 0;
    for (; c0 + 4 <= nc; c0 += 4) {
        double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
        double e0 = 0.0, e1 = 0.0, e2 = 0.0, e3 = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t s = slots[i];
            if (s < 0) {
                continue;
            }
            double v = it->items[i].v;
            const double *wr = W + s * ccap + c0;
            d0 += wr[0] * v;
            d1 += wr[1] * v;
            d2 += wr[2] * v;
            d3 += wr[3] * v;
            if (averaged) {
                const double *ur = U + s * ccap + c0;
                e0 += ur[0] * v;
                e1 += ur[1] * v;
                e2 += ur[2] * v;
                e3 += ur[3] * v;
            }
        }
        dot[c0] = d0;
        dot[c0 + 1] = d1;
        dot[c0 + 2] = d2;
        dot[c0 + 3] = d3;
        if (averaged) {
            udot[c0] = e0;
            udot[c0 + 1] = e1;
            udot[c0 + 2] = e2;
            udot[c0 + 3] = e3;
        }
    }
    for (; c0 < nc; c0++) {
        double d = 0.0, e = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t s = slots[i];
            if (s < 0) {
                continue;
            }
            double v = it->items[i].v;
            d += W[s * ccap + c0] * v;
            if (averaged) {
                e += U[s * ccap + c0] * v;
            }
        }
        dot[c0] = d;
        if (averaged) {
            udot[c0] = e;
        }
    }
}

/* Every class's dot (and, averaged, udot) of x into self->dot, self->udot: as
 * items_dot/items_avg_dot per class, left folds in x's order over the keys the class has.
 *
 * With every value of x finite, and no accumulator alone (without its class's weight), the
 * presence bytes need not be read: a cell the class lacks holds 0.0 and adds 0.0 * v, a
 * zero, which changes no left fold from +0.0 (such a fold is never -0.0). */
static void FOLD_CLONES
store_fold(ClassStore *self, Items *it, int averaged)
{
    Py_ssize_t nc = self->nc, ccap = self->ccap;
    /* restrict: the arrays never overlap, so the class loops below are vectorised (each
     * class's sum still its own left fold) */
    double *restrict dot = self->dot, *restrict udot = self->udot;
    for (Py_ssize_t c = 0; c < nc; c++) {
        dot[c] = 0.0;
        udot[c] = 0.0;
    }
    int dense = !self->u_alone;
    for (Py_ssize_t i = 0; dense && i < it->n; i++) {
        dense = isfinite(it->items[i].v);
    }
    if (dense) {
        switch (averaged ? -nc : nc) {
#define FOLD_CASE(k)                                                                         \
    case k:                                                                                  \
        store_fold_fixed(self, it, 0, k);                                                    \
        return;                                                                              \
    case -k:                                                                                 \
        store_fold_fixed(self, it, 1, k);                                                    \
        return;
            FOLD_CASE(1) FOLD_CASE(2) FOLD_CASE(3) FOLD_CASE(4) FOLD_CASE(5) FOLD_CASE(6)
            FOLD_CASE(7) FOLD_CASE(8) FOLD_CASE(9) FOLD_CASE(10) FOLD_CASE(11) FOLD_CASE(12)
#undef FOLD_CASE
        default:
            if (averaged) {
                store_fold_dense(self, it, 1);
            }
            else {
                store_fold_dense(self, it, 0);
            }
            return;
        }
    }
    for (Py_ssize_t i = 0; i < it->n; i++) {
        Py_ssize_t s = self->slots[i];
        if (s < 0) {
            continue;
        }
        double v = it->items[i].v;
        const double *wr = self->W + s * ccap, *ur = self->U + s * ccap;
        const unsigned char *pr = self->P + s * ccap;
        for (Py_ssize_t c = 0; c < nc; c++) {
            unsigned char p = pr[c];
            if (p & IN_W) {
                dot[c] += wr[c] * v;
                if (averaged && (p & IN_U)) {
                    udot[c] += ur[c] * v;
                }
            }
        }
    }
}

/* The prologue of the scoring methods: nargs checked, the divisor into *t (when t is given:
 * the first argument), the snapshot flag, x loaded and its slots found, the dots (averaged:
 * the accumulators' too) folded. 1: done (release the items); 0: not handled (nothing held);
 * -1: error. */
static int
store_begin(ClassStore *self, const char *name, PyObject *const *args, Py_ssize_t nargs,
            int averaged, Py_ssize_t high, double *t, Items *it, int *want_snapshot)
{
    Py_ssize_t low = t != NULL ? 2 : 1;
    if (check_nargs(name, nargs, low, high) < 0) {
        return -1;
    }
    *want_snapshot = 0;
    if (nargs > low && (*want_snapshot = PyObject_IsTrue(args[low])) < 0) {
        return -1;
    }
    if (t != NULL && !count_value(args[0], t)) {
        return 0;
    }
    int status = items_load(it, args[low - 1]);
    if (status <= 0) {
        return status;
    }
    status = store_slots(self, it);
    if (status <= 0) {
        items_release(it);
        return status;
    }
    store_fold(self, it, averaged);
    return 1;
}

/* Whether the argmax so far is "none yet": no class, or the class None (as the reference's
 * `best is None or s > best_score`, where a class None is beaten by any later class). */
static inline int
store_no_best(ClassStore *self, Py_ssize_t best)
{
    return best < 0 || PyList_GET_ITEM(self->labels, best) == Py_None;
}

PyDoc_STRVAR(store_argmax_doc,
"class_argmax(x, snapshot=False, /)\n"
"--\n"
"\n"
"What the module's :func:`class_argmax` gives for the store's model: ``(y_hat, r)``, or\n"
"``(y_hat, r, snapshot)``. None when not handled (see the class).");

static PyObject *
store_argmax(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = store_begin(self, "class_argmax", args, nargs, 0, 2, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    Py_ssize_t best = -1;
    double best_score = -INFINITY;
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        double s = self->dot[c] + self->B[c];
        if (store_no_best(self, best) || s > best_score) {
            best = c;
            best_score = s;
        }
    }
    PyObject *y_hat = Py_NewRef(best < 0 ? Py_None : PyList_GET_ITEM(self->labels, best));
    return pack_norm(&it, want_snapshot, y_hat, items_norm(&it));
}

PyDoc_STRVAR(store_avg_argmax_doc,
"avg_class_argmax(t, x, snapshot=False, /)\n"
"--\n"
"\n"
"What the module's :func:`avg_class_argmax` gives for the store's model (t the divisor D(t)):\n"
"``(a_hat, (y_hat, r))``, or ``(a_hat, (y_hat, r, snapshot))``. None when not handled.");

static PyObject *
store_avg_argmax(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    double t;
    int status =
        store_begin(self, "avg_class_argmax", args, nargs, 1, 3, &t, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    Py_ssize_t best = -1, abest = -1;
    double best_score = -INFINITY, abest_score = -INFINITY;
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        double s = self->dot[c] + self->B[c];
        double as = s - (self->udot[c] + self->UB[c]) / t;
        if (store_no_best(self, best) || s > best_score) {
            best = c;
            best_score = s;
        }
        if (store_no_best(self, abest) || as > abest_score) {
            abest = c;
            abest_score = as;
        }
    }
    PyObject *y_hat = Py_NewRef(best < 0 ? Py_None : PyList_GET_ITEM(self->labels, best));
    PyObject *a_hat = Py_NewRef(abest < 0 ? Py_None : PyList_GET_ITEM(self->labels, abest));
    PyObject *inner = pack_norm(&it, want_snapshot, y_hat, items_norm(&it));
    if (inner == NULL) {
        Py_DECREF(a_hat);
        return NULL;
    }
    return pack(a_hat, inner, NULL);
}

PyDoc_STRVAR(store_row_dot_norm_doc,
"row_dot_norm(x, snapshot=False, /)\n"
"--\n"
"\n"
"What the module's :func:`dot_norm` gives for the weights of the store's first class (a\n"
"binary perceptron's model, loaded as a store of one class): ``(dot, r)`` or\n"
"``(dot, r, snapshot)``. None when not handled (see the class) or the store has no class.");

static PyObject *
store_row_dot_norm(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = store_begin(self, "row_dot_norm", args, nargs, 0, 2, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    if (self->nc < 1) {
        return release_unhandled(&it, 0);
    }
    return pack_norm(&it, want_snapshot, PyFloat_FromDouble(self->dot[0]), items_norm(&it));
}

PyDoc_STRVAR(store_row_avg_dot_norm_doc,
"row_avg_dot_norm(x, snapshot=False, /)\n"
"--\n"
"\n"
"What the module's :func:`avg_dot_norm` gives for the weights and accumulators of the\n"
"store's first class: ``(udot, (dot, r))``, or ``(udot, (dot, r, snapshot))``. None when not\n"
"handled or the store has no class.");

static PyObject *
store_row_avg_dot_norm(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    /* the accumulators folded, without a divisor: no averaged score is made here */
    int status =
        store_begin(self, "row_avg_dot_norm", args, nargs, 1, 2, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    if (self->nc < 1) {
        return release_unhandled(&it, 0);
    }
    double udot = self->udot[0];
    PyObject *inner =
        pack_norm(&it, want_snapshot, PyFloat_FromDouble(self->dot[0]), items_norm(&it));
    if (inner == NULL) {
        return NULL;
    }
    return pack(PyFloat_FromDouble(udot), inner, NULL);
}

/* The dict {label: score} of every class in order, plain or averaged (divisor t). */
static PyObject *
store_scores_dict(ClassStore *self, int averaged, double t)
{
    PyObject *scores = PyDict_New();
    if (scores == NULL) {
        return NULL;
    }
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        double s = self->dot[c] + self->B[c];
        if (averaged) {
            s = s - (self->udot[c] + self->UB[c]) / t;
        }
        PyObject *value = PyFloat_FromDouble(s);
        if (value == NULL ||
            PyDict_SetItem(scores, PyList_GET_ITEM(self->labels, c), value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(scores);
            return NULL;
        }
        Py_DECREF(value);
    }
    return scores;
}

PyDoc_STRVAR(store_scores_doc,
"class_scores(x, /)\n"
"--\n"
"\n"
"The dict of plain scores, as the module's :func:`class_scores`. None when not handled.");

static PyObject *
store_scores(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    int status = store_begin(self, "class_scores", args, nargs, 0, 1, NULL, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    items_release(&it);
    return store_scores_dict(self, 0, 1.0);
}

PyDoc_STRVAR(store_avg_scores_doc,
"avg_class_scores(t, x, /)\n"
"--\n"
"\n"
"The dict of averaged scores, as the module's :func:`avg_class_scores`. None when not\n"
"handled.");

static PyObject *
store_avg_scores(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    Items it;
    int want_snapshot;
    double t;
    int status =
        store_begin(self, "avg_class_scores", args, nargs, 1, 2, &t, &it, &want_snapshot);
    if (status <= 0) {
        return unhandled(status);
    }
    items_release(&it);
    return store_scores_dict(self, 1, t);
}

/* A number as Python holds it: a float, or an int (exact in long long). */
typedef struct {
    double v;
    long long iv;
    int is_int;
} Num;

static int
num_value(PyObject *obj, Num *n)
{
    return number_value(obj, &n->v, &n->iv, &n->is_int);
}

/* The row of a label: >= 0; -1 not a class (no error); -2 error. */
static Py_ssize_t
store_row(ClassStore *self, PyObject *label)
{
    PyObject *got = PyDict_GetItemWithError(self->classes, label);
    if (got == NULL) {
        return PyErr_Occurred() ? -2 : -1;
    }
    return PyLong_AsSsize_t(got);
}

PyDoc_STRVAR(store_update_doc,
"update(x, y, y_hat, lr, db, c, /)\n"
"--\n"
"\n"
"The update of a mistake, exactly as ``MulticlassPerceptron._update`` makes it on its dicts\n"
"(``y_hat`` None or a class; ``y`` a class or a new one, added last; ``db`` the bias step;\n"
"``c`` the averaging coefficient c(t), or None when the update does not average), every new\n"
"value checked before any is stored: True when done; ``\"a bias\"`` or ``\"a weight\"`` when\n"
"that would not be finite (nothing changed); None when not handled (nothing changed).");

/* What store_update_items did. */
#define UPDATE_ERROR -1
#define UPDATE_UNHANDLED 0
#define UPDATE_DONE 1
#define UPDATE_BIAS 2   /* a bias would not be finite: nothing changed */
#define UPDATE_WEIGHT 3 /* a weight would not be finite: nothing changed */

/* Room for l to take n more slots. 0: done; -1: error. */
static int
slot_list_reserve(SlotList *l, Py_ssize_t n)
{
    if (l->n + n <= l->cap) {
        return 0;
    }
    Py_ssize_t cap = l->cap ? l->cap : 8;
    while (cap < l->n + n) {
        cap *= 2;
    }
    Py_ssize_t *v = PyMem_Realloc(l->v, (size_t)cap * sizeof(Py_ssize_t));
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    l->v = v;
    l->cap = cap;
    return 0;
}

/* Room in the rule's scratch for a row of n: the checked values (4n doubles: two classes'
 * weights and accumulators), the joined slots (4n), the values (n doubles) and whether each is
 * an int (n bytes). 0: done; -1: error. */
static int
store_rule_room(ClassStore *self, Py_ssize_t n)
{
    if (n <= self->rcap) {
        return 0;
    }
    Py_ssize_t cap = n > 2 * self->rcap ? n : 2 * self->rcap;
    size_t unit = 4 * sizeof(double) + 4 * sizeof(Py_ssize_t) + sizeof(double) + 1;
    char *buf = PyMem_Realloc(self->rbuf, (size_t)cap * unit);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->rbuf = buf;
    self->rcap = cap;
    return 0;
}

/* A binary mistake's update (_rules.h's binary_rule_update) on class row 0, the items of x
 * loaded: their slots found, the keys new to the store given slots, the cells checked before
 * any is written. UPDATE_DONE; UPDATE_WEIGHT (a value not finite:
 * nothing written); UPDATE_UNHANDLED (the store too large); UPDATE_ERROR. */
static int
store_binary_update(ClassStore *self, Items *it, const BinaryStep *s)
{
    Py_ssize_t n = it->n, fresh = 0;
    int status = store_slots(self, it); /* the scratch may hold another dict's since the fold */
    if (status <= 0) {
        return status == 0 ? UPDATE_UNHANDLED : UPDATE_ERROR;
    }
    if (store_rule_room(self, n) < 0) {
        return UPDATE_ERROR;
    }
    double *checked = (double *)self->rbuf, *values = checked + 4 * n;
    Py_ssize_t *joined = (Py_ssize_t *)(values + n);
    unsigned char *is_int = (unsigned char *)(joined + 4 * n);
    for (Py_ssize_t i = 0; i < n; i++) {
        values[i] = it->items[i].v;
        is_int[i] = (unsigned char)it->items[i].is_int;
        fresh += self->slots[i] < 0;
    }
    if (fresh) {
        status = store_reserve(self, self->nf + fresh, self->nc);
        if (status <= 0) {
            return status == 0 ? UPDATE_UNHANDLED : UPDATE_ERROR;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (self->slots[i] < 0) {
                Py_ssize_t slot = store_add_slot(self, it->items[i].key);
                if (slot < 0) {
                    return slot == -2 ? UPDATE_UNHANDLED : UPDATE_ERROR;
                }
                self->slots[i] = slot;
            }
        }
    }
    if (slot_list_reserve(&self->wo[0], n) < 0 ||
        (s->averaging && slot_list_reserve(&self->uo[0], n) < 0)) {
        return UPDATE_ERROR;
    }
    RuleCells c = {self->W, self->U, self->P, self->ccap, joined, joined + n, 0, 0, 0};
    RuleRow row = {n, NULL, self->slots, values, NULL, is_int};
    if (!rule_update(&c, &row, s, 1, checked)) {
        return UPDATE_WEIGHT;
    }
    self->version++;
    SlotList *wo = &self->wo[0], *uo = &self->uo[0];
    for (Py_ssize_t k = 0; k < c.n_joined_w; k++) {
        wo->v[wo->n++] = c.joined_w[k];
    }
    for (Py_ssize_t k = 0; k < c.n_joined_u; k++) {
        uo->v[uo->n++] = c.joined_u[k];
    }
    return UPDATE_DONE;
}

/* Whether a step is one the rule computes as Python does: not an int past 2**53 (Python's
 * product of such an int and an int value is exact, a double's not). */
static inline int
step_exact(const BinaryStep *s)
{
    return (!s->step_int || fabs(s->step) <= RULE_EXACT_INT) &&
           (!s->averaging || !s->cstep_int || fabs(s->cstep) <= RULE_EXACT_INT);
}

/* A multi-class mistake's update (_rules.h's multi_rule_next/_join, the steps and biases s)
 * on class row ry (-1: y, a class new to the store, added last) and rh (-1: none), the items
 * of x loaded: their slots found, the keys new to the store given slots, every cell checked
 * before any is written, then the biases. UPDATE_DONE; UPDATE_WEIGHT (a value not finite:
 * nothing written); UPDATE_UNHANDLED (a step not exact, the store too large); UPDATE_ERROR. */
static int
store_multi_update(ClassStore *self, Items *it, PyObject *y, Py_ssize_t ry, Py_ssize_t rh,
                   const MultiStep *s)
{
    Py_ssize_t n = it->n, fresh = 0;
    if (!step_exact(&s->sy) || (rh >= 0 && !step_exact(&s->sh))) {
        return UPDATE_UNHANDLED;
    }
    int status = store_slots(self, it); /* the scratch may hold another dict's since the fold */
    if (status <= 0) {
        return status == 0 ? UPDATE_UNHANDLED : UPDATE_ERROR;
    }
    if (store_rule_room(self, n) < 0) {
        return UPDATE_ERROR;
    }
    double *checked = (double *)self->rbuf, *values = checked + 4 * n;
    Py_ssize_t *joined = (Py_ssize_t *)(values + n);
    unsigned char *is_int = (unsigned char *)(joined + 4 * n);
    for (Py_ssize_t i = 0; i < n; i++) {
        values[i] = it->items[i].v;
        is_int[i] = (unsigned char)it->items[i].is_int;
        fresh += self->slots[i] < 0;
    }
    /* room first (a model too large is not handled, nothing changed); a new class's column,
     * never written, holds zeros */
    status = store_reserve(self, self->nf + fresh, self->nc + (ry < 0));
    if (status <= 0) {
        return status == 0 ? UPDATE_UNHANDLED : UPDATE_ERROR;
    }
    for (Py_ssize_t i = 0; fresh && i < n; i++) {
        if (self->slots[i] < 0) {
            Py_ssize_t slot = store_add_slot(self, it->items[i].key);
            if (slot < 0) {
                return slot == -2 ? UPDATE_UNHANDLED : UPDATE_ERROR;
            }
            self->slots[i] = slot;
        }
    }
    Py_ssize_t cy = ry < 0 ? self->nc : ry, ccap = self->ccap;
    if (slot_list_reserve(&self->wo[cy], n) < 0 || slot_list_reserve(&self->uo[cy], n) < 0 ||
        (rh >= 0 && (slot_list_reserve(&self->wo[rh], n) < 0 ||
                     slot_list_reserve(&self->uo[rh], n) < 0))) {
        return UPDATE_ERROR;
    }
    RuleCells y_cells = {self->W + cy, self->U + cy, self->P + cy, ccap, joined, joined + n,
                         0, 0, 0};
    RuleCells h_cells = {self->W + rh, self->U + rh, self->P + rh, ccap, joined + 2 * n,
                         joined + 3 * n, 0, 0, 0};
    RuleCells *ch = rh >= 0 ? &h_cells : NULL;
    RuleRow row = {n, NULL, self->slots, values, NULL, is_int};
    if (!multi_rule_next(&y_cells, ch, &row, s, 1, checked)) {
        return UPDATE_WEIGHT;
    }
    if (ry < 0 && (status = store_add_class(self, y)) <= 0) { /* no move: the room is there */
        return status == 0 ? UPDATE_UNHANDLED : UPDATE_ERROR;
    }
    self->version++;
    multi_rule_join(&y_cells, ch, &row, s, 1, checked);
    RuleCells *cells[2] = {&y_cells, ch};
    Py_ssize_t rows[2] = {cy, rh};
    for (int k = 0; k < 2 && cells[k] != NULL; k++) {
        SlotList *wo = &self->wo[rows[k]], *uo = &self->uo[rows[k]];
        for (Py_ssize_t j = 0; j < cells[k]->n_joined_w; j++) {
            wo->v[wo->n++] = cells[k]->joined_w[j];
        }
        for (Py_ssize_t j = 0; j < cells[k]->n_joined_u; j++) {
            uo->v[uo->n++] = cells[k]->joined_u[j];
        }
    }
    multi_rule_biases(s, cy, rh, self->B, self->UB);
    return UPDATE_DONE;
}

/* store_update on the items of x already loaded (and kept: the caller releases them): the
 * numbers of the update by the rule (multi_rule_step), then store_multi_update. */
static int
store_update_items(ClassStore *self, Items *it, PyObject *y, PyObject *y_hat, Num lr, Num db,
                   int averaging, Num c)
{
    Py_ssize_t ry = store_row(self, y), rh = -1;
    if (ry == -2) {
        return UPDATE_ERROR;
    }
    if (y_hat != Py_None) {
        rh = store_row(self, y_hat);
        if (rh == -2) {
            return UPDATE_ERROR;
        }
        if (rh < 0 || rh == ry) {
            return UPDATE_UNHANDLED;
        }
    }
    MultiStep s;
    int finite = multi_rule_step(lr.v, lr.is_int, db.v, db.is_int, averaging, c.v, c.is_int,
                                 ry < 0 ? 0.0 : self->B[ry], ry < 0 ? 0.0 : self->UB[ry],
                                 rh >= 0, rh >= 0 ? self->B[rh] : 0.0,
                                 rh >= 0 ? self->UB[rh] : 0.0, &s);
    if (!step_exact(&s.sy) || (rh >= 0 && !step_exact(&s.sh))) {
        return UPDATE_UNHANDLED;
    }
    int status = store_slots(self, it);
    if (status <= 0) {
        return status;
    }
    if (!finite) {
        return UPDATE_BIAS;
    }
    return store_multi_update(self, it, y, ry, rh, &s);
}

static PyObject *
store_update(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("update", nargs, 6, 6) < 0) {
        return NULL;
    }
    int averaging = args[5] != Py_None;
    Num lr, db, c = {0.0, 0, 1};
    if (!num_value(args[3], &lr) || !num_value(args[4], &db) ||
        (averaging && !num_value(args[5], &c))) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, args[0]);
    if (status <= 0) {
        return unhandled(status);
    }
    status = store_update_items(self, &it, args[1], args[2], lr, db, averaging, c);
    items_release(&it);
    switch (status) {
    case UPDATE_DONE:
        Py_RETURN_TRUE;
    case UPDATE_BIAS:
        return PyUnicode_FromString("a bias");
    case UPDATE_WEIGHT:
        return PyUnicode_FromString("a weight");
    default:
        return unhandled(status);
    }
}

PyDoc_STRVAR(store_rescale_doc,
"rescale(factor, /)\n"
"--\n"
"\n"
"Every accumulator and averaging bias multiplied by factor (a float), as\n"
"``MulticlassPerceptron._renormalise`` does on its dicts.");

/* Every accumulator and averaging bias multiplied by f. */
static void
store_rescale_by(ClassStore *self, double f)
{
    self->version++;
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        SlotList *l = &self->uo[c];
        for (Py_ssize_t j = 0; j < l->n; j++) {
            double *cell = &self->U[l->v[j] * self->ccap + c];
            *cell = *cell * f;
        }
        self->UB[c] = self->UB[c] * f;
    }
}

static PyObject *
store_rescale(ClassStore *self, PyObject *arg)
{
    if (!PyFloat_CheckExact(arg)) {
        PyErr_SetString(PyExc_TypeError, "rescale() takes a float");
        return NULL;
    }
    store_rescale_by(self, PyFloat_AS_DOUBLE(arg));
    Py_RETURN_NONE;
}

/* Read one class's dict (weights, bit IN_W, or accumulators, IN_U) into row c. 1: done; 0:
 * not handled; -1: error. */
static int
store_read_dict(ClassStore *self, Py_ssize_t c, PyObject *d, int bit)
{
    if (!PyDict_CheckExact(d)) {
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (!plain_key(key) || !PyFloat_CheckExact(value)) {
            return 0;
        }
        Py_ssize_t s = store_add_slot(self, key);
        if (s < 0) {
            return s == -2 ? 0 : -1;
        }
        Py_ssize_t at = s * self->ccap + c;
        (bit == IN_W ? self->W : self->U)[at] = PyFloat_AS_DOUBLE(value);
        self->P[at] |= bit;
        if (bit == IN_U && !(self->P[at] & IN_W)) {
            self->u_alone = 1; /* read after the weights: for good */
        }
        if (slot_list_append(bit == IN_W ? &self->wo[c] : &self->uo[c], s) < 0) {
            return -1;
        }
    }
    return 1;
}

PyDoc_STRVAR(store_load_doc,
"load(w, b, u, ub, /)\n"
"--\n"
"\n"
"Take the model of the dicts (class -> feature -> weight, class -> bias, and the averaging\n"
"accumulators likewise) into this new, empty store: True; False when not handled (a key, a\n"
"weight or a dict of another type, classes that differ, a model too large), and then the\n"
"store must not be used.");

static PyObject *
store_load(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("load", nargs, 4, 4) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *b = args[1], *u = args[2], *ub = args[3];
    if (self->nc || self->nf) {
        PyErr_SetString(PyExc_ValueError, "load() takes an empty store");
        return NULL;
    }
    self->version++;
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(b) || !PyDict_CheckExact(u) ||
        !PyDict_CheckExact(ub)) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t n = PyDict_GET_SIZE(w);
    if (PyDict_GET_SIZE(b) != n || PyDict_GET_SIZE(u) != n || PyDict_GET_SIZE(ub) != n) {
        Py_RETURN_FALSE;
    }
    PyObject *labels = PyDict_Keys(w); /* a list: w's classes cannot change under us */
    if (labels == NULL) {
        return NULL;
    }
    int status = 1;
    for (Py_ssize_t k = 0; status == 1 && k < n; k++) {
        PyObject *c = PyList_GET_ITEM(labels, k);
        PyObject *wc = PyDict_GetItemWithError(w, c);
        PyObject *uc = wc ? PyDict_GetItemWithError(u, c) : NULL;
        PyObject *bc = uc ? PyDict_GetItemWithError(b, c) : NULL;
        PyObject *ubc = bc ? PyDict_GetItemWithError(ub, c) : NULL;
        if (ubc == NULL) {
            status = PyErr_Occurred() ? -1 : 0;
            break;
        }
        if (!PyFloat_CheckExact(bc) || !PyFloat_CheckExact(ubc)) {
            status = 0;
            break;
        }
        Py_INCREF(wc);
        Py_INCREF(uc);
        double bv = PyFloat_AS_DOUBLE(bc), ubv = PyFloat_AS_DOUBLE(ubc);
        status = store_add_class(self, c);
        if (status == 1) {
            Py_ssize_t r = self->nc - 1;
            self->B[r] = bv;
            self->UB[r] = ubv;
            status = store_read_dict(self, r, wc, IN_W);
            if (status == 1) {
                status = store_read_dict(self, r, uc, IN_U);
            }
        }
        Py_DECREF(wc);
        Py_DECREF(uc);
    }
    Py_DECREF(labels);
    if (status < 0) {
        return NULL;
    }
    return PyBool_FromLong(status == 1);
}

PyDoc_STRVAR(store_pairs_doc,
"pairs(label, accumulators=False, /)\n"
"--\n"
"\n"
"Class ``label``'s weights (or averaging accumulators) as the list of ``[key, value]`` pairs\n"
"``learners._base.pairs`` makes of the dict the pure-Python code would hold: keys in the order\n"
"the dict got them (each a str or an int, which JSON keeps as it is). What a state saves,\n"
"without building the dict first. KeyError for a class the store does not have.");

static PyObject *
store_pairs(ClassStore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (check_nargs("pairs", nargs, 1, 2) < 0) {
        return NULL;
    }
    int acc = 0;
    if (nargs > 1 && (acc = PyObject_IsTrue(args[1])) < 0) {
        return NULL;
    }
    Py_ssize_t c = store_row(self, args[0]);
    if (c == -2) {
        return NULL;
    }
    if (c < 0) {
        PyErr_SetObject(PyExc_KeyError, args[0]);
        return NULL;
    }
    const SlotList *l = acc ? &self->uo[c] : &self->wo[c];
    const double *cells = acc ? self->U : self->W;
    PyObject *out = PyList_New(l->n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < l->n; j++) {
        Py_ssize_t s = l->v[j];
        PyObject *value = PyFloat_FromDouble(cells[s * self->ccap + c]);
        PyObject *pair = value == NULL ? NULL : PyList_New(2);
        if (pair == NULL) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(pair, 0, Py_NewRef(PyList_GET_ITEM(self->keys, s)));
        PyList_SET_ITEM(pair, 1, value);
        PyList_SET_ITEM(out, j, pair);
    }
    return out;
}

PyDoc_STRVAR(store_biases_doc,
"biases()\n"
"--\n"
"\n"
"``(b, ub)``: the dicts class -> bias and class -> averaging bias, classes in the order first\n"
"seen (what :meth:`dicts` gives for them, without the weight dicts).");

static PyObject *
store_biases(ClassStore *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *b = PyDict_New(), *ub = PyDict_New();
    if (b == NULL || ub == NULL) {
        goto error;
    }
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        PyObject *label = PyList_GET_ITEM(self->labels, c);
        double bv[2] = {self->B[c], self->UB[c]};
        for (int k = 0; k < 2; k++) {
            PyObject *value = PyFloat_FromDouble(bv[k]);
            if (value == NULL || PyDict_SetItem(k == 0 ? b : ub, label, value) < 0) {
                Py_XDECREF(value);
                goto error;
            }
            Py_DECREF(value);
        }
    }
    return Py_BuildValue("(NN)", b, ub);
error:
    Py_XDECREF(b);
    Py_XDECREF(ub);
    return NULL;
}

PyDoc_STRVAR(store_dicts_doc,
"dicts()\n"
"--\n"
"\n"
"The model as the new dicts ``(w, b, u, ub)`` the pure-Python code would hold: classes in the\n"
"order first seen, each class's keys in the order it got them.");

static PyObject *
store_dicts(ClassStore *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *w = PyDict_New(), *u = PyDict_New();
    if (w == NULL || u == NULL) {
        goto error;
    }
    for (Py_ssize_t c = 0; c < self->nc; c++) {
        PyObject *label = PyList_GET_ITEM(self->labels, c);
        for (int k = 0; k < 2; k++) {
            SlotList *l = k == 0 ? &self->wo[c] : &self->uo[c];
            const double *cells = k == 0 ? self->W : self->U;
            PyObject *d = PyDict_New();
            if (d == NULL) {
                goto error;
            }
            if (PyDict_SetItem(k == 0 ? w : u, label, d) < 0) {
                Py_DECREF(d);
                goto error;
            }
            Py_DECREF(d);
            for (Py_ssize_t j = 0; j < l->n; j++) {
                Py_ssize_t s = l->v[j];
                PyObject *value = PyFloat_FromDouble(cells[s * self->ccap + c]);
                if (value == NULL ||
                    PyDict_SetItem(d, PyList_GET_ITEM(self->keys, s), value) < 0) {
                    Py_XDECREF(value);
                    goto error;
                }
                Py_DECREF(value);
            }
        }
    }
    PyObject *biases = store_biases(self, NULL);
    if (biases == NULL) {
        goto error;
    }
    PyObject *result = Py_BuildValue("(NONO)", w, PyTuple_GET_ITEM(biases, 0),
                                     u, PyTuple_GET_ITEM(biases, 1));
    Py_DECREF(biases);
    return result;
error:
    Py_XDECREF(w);
    Py_XDECREF(u);
    return NULL;
}

static PyObject *
store_get_classes(ClassStore *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->classes);
}

static PyObject *
store_get_cells(ClassStore *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->fcap * self->ccap);
}

static PyObject *
store_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "ClassStore() takes no arguments");
        return NULL;
    }
    ClassStore *self = (ClassStore *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->index = PyDict_New();
    self->keys = PyList_New(0);
    self->classes = PyDict_New();
    self->labels = PyList_New(0);
    if (!self->index || !self->keys || !self->classes || !self->labels) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
store_traverse(ClassStore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->index);
    Py_VISIT(self->keys);
    Py_VISIT(self->classes);
    Py_VISIT(self->labels);
    for (Py_ssize_t i = 0; i < self->scap; i++) {
        Py_VISIT(self->lk[i]);
    }
    return 0;
}

static int
store_clear(ClassStore *self)
{
    Py_CLEAR(self->index);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->classes);
    Py_CLEAR(self->labels);
    for (Py_ssize_t i = 0; i < self->scap; i++) {
        Py_CLEAR(self->lk[i]);
    }
    return 0;
}

static void
store_dealloc(ClassStore *self)
{
    PyObject_GC_UnTrack(self);
    store_clear(self);
    for (Py_ssize_t c = 0; c < self->ccap; c++) {
        PyMem_Free(self->wo[c].v);
        PyMem_Free(self->uo[c].v);
    }
    PyMem_Free(self->wo);
    PyMem_Free(self->uo);
    PyMem_Free(self->W);
    PyMem_Free(self->U);
    PyMem_Free(self->P);
    PyMem_Free(self->B);
    PyMem_Free(self->UB);
    PyMem_Free(self->dot);
    PyMem_Free(self->udot);
    PyMem_Free(self->slots);
    PyMem_Free(self->ls);
    PyMem_Free(self->lk);
    PyMem_Free(self->vals);
    PyMem_Free(self->rbuf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef store_methods[] = {
    {"class_argmax", (PyCFunction)(void (*)(void))store_argmax, METH_FASTCALL,
     store_argmax_doc},
    {"avg_class_argmax", (PyCFunction)(void (*)(void))store_avg_argmax, METH_FASTCALL,
     store_avg_argmax_doc},
    {"class_scores", (PyCFunction)(void (*)(void))store_scores, METH_FASTCALL,
     store_scores_doc},
    {"avg_class_scores", (PyCFunction)(void (*)(void))store_avg_scores, METH_FASTCALL,
     store_avg_scores_doc},
    {"row_dot_norm", (PyCFunction)(void (*)(void))store_row_dot_norm, METH_FASTCALL,
     store_row_dot_norm_doc},
    {"row_avg_dot_norm", (PyCFunction)(void (*)(void))store_row_avg_dot_norm, METH_FASTCALL,
     store_row_avg_dot_norm_doc},
    {"update", (PyCFunction)(void (*)(void))store_update, METH_FASTCALL, store_update_doc},
    {"rescale", (PyCFunction)store_rescale, METH_O, store_rescale_doc},
    {"load", (PyCFunction)(void (*)(void))store_load, METH_FASTCALL, store_load_doc},
    {"pairs", (PyCFunction)(void (*)(void))store_pairs, METH_FASTCALL, store_pairs_doc},
    {"biases", (PyCFunction)store_biases, METH_NOARGS, store_biases_doc},
    {"dicts", (PyCFunction)store_dicts, METH_NOARGS, store_dicts_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef store_getset[] = {
    {"classes", (getter)store_get_classes, NULL,
     "The dict label -> row of the classes, in the order first seen (read it, do not change "
     "it).",
     NULL},
    {"cells", (getter)store_get_cells, NULL,
     "The cells allocated per array (slots x class capacity).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(store_doc,
"ClassStore()\n"
"--\n"
"\n"
"An averaged multi-class perceptron's model in native arrays (see the comment in\n"
"_speedups.c): filled by :meth:`load` from the dicts, then scored and updated in place,\n"
"read back as dicts by :meth:`dicts`. Each method gives what the module's kernel (or the\n"
"learner's pure-Python code) gives on the equivalent dicts, to the last bit, and declines\n"
"(None) what it does not handle, changing nothing.");

static PyTypeObject ClassStoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stream_perceptron._speedups.ClassStore",
    .tp_basicsize = sizeof(ClassStore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = store_doc,
    .tp_new = store_new,
    .tp_dealloc = (destructor)store_dealloc,
    .tp_traverse = (traverseproc)store_traverse,
    .tp_clear = (inquiry)store_clear,
    .tp_methods = store_methods,
    .tp_getset = store_getset,
};

/* -- BinaryCore and MulticlassCore: the perceptrons' dict API in C ------------------------------
 *
 * The bases of learners.perceptron.Perceptron and learners.multiclass.MulticlassPerceptron.
 * Their fields are the learner's counters, R, its store, the hyperparameters the learning step
 * reads and (binary) the biases and the label encoding, (multi-class) whether a class is a
 * bool: the Python code reads and sets them as attributes (object members, which CPython's
 * attribute loads specialise like any slot), and predict_one, learn_one and predict_learn_one
 * read them here without a lookup. There is one copy of each: the learner has no other.
 *
 * The three methods handle the usual case in C: the model in its store (so init="zeros" and
 * the learning code this class's), the plain perceptron, the plain or the forgetting average
 * (its rescaling too), a settled label encoding (binary) or a str or int label (multi-class),
 * x an exact dict the store takes, the scalars exact floats and ints. Anything else, and every
 * case that would raise (a value too large, a label outside the encoding), calls the learner's
 * pure-Python method (_predict_one_py, _learn_one_py, _predict_learn_one_py) having changed
 * nothing, so the Python code stays the reference and decides what it alone handles. The
 * arithmetic is the rules' (_rules.h: binary_rule_*, multi_rule_*, which the blocks run too),
 * that code's operation for operation (tests/learners/test_binary_core.py and
 * test_multiclass_core.py hold the two to the same bits).
 *
 * predict_one keeps what it folded (x, its items, the plain dot or argmax, the store's version
 * and n_seen) for the learn_one that usually follows on the same dict: used only for that very
 * dict, holding the same key and value objects, with the store unchanged since.
 */

/* PyMemberDef's object type: Py_T_OBJECT_EX is public from Python 3.12, where structmember.h's
 * T_OBJECT_EX (the same value) is deprecated; a version guard for a public API. */
#if PY_VERSION_HEX >= 0x030C0000
#define MEMBER_OBJECT Py_T_OBJECT_EX
#else
#include <structmember.h>
#define MEMBER_OBJECT T_OBJECT_EX
#endif

/* What predict_one folded, for the learn_one that follows. */
typedef struct {
    PyObject *x;     /* the dict, or NULL */
    PyObject *store; /* the store it was folded with (held: its address is not reused) */
    Items items;     /* x's items (references held); also the learning step's items */
    unsigned long long version;
    long long t;
    double dot;       /* binary: the plain dot */
    Py_ssize_t best;  /* multi-class: the plain argmax's row (-1: none) */
} Memo;

/* The fields both cores share, first in each. */
typedef struct {
    PyObject_HEAD
    PyObject *n_seen, *n_mistakes, *max_norm, *store;
    PyObject *lr, *bias_mode, *averaged, *half_life, *avg_ref, *beta;
    Memo memo;
    unsigned long long fast_steps, memo_hits; /* examples learned here; memos used (tests) */
} CoreHead;

typedef struct {
    CoreHead h;
    PyObject *b, *ub, *labels;
} BinaryCore;

typedef struct {
    CoreHead h;
    PyObject *bool_classes;
} MulticlassCore;

static PyObject *str_positive, *str_negative, *str_settled, *str_codes;
static PyObject *str_predict_one_py, *str_learn_one_py, *str_predict_learn_one_py;

static void
memo_clear(Memo *memo)
{
    items_release(&memo->items);
    Py_CLEAR(memo->x);
    Py_CLEAR(memo->store);
}

/* Keep x's fold (its items already in the memo). */
static void
memo_keep(Memo *memo, PyObject *x, ClassStore *store, long long t)
{
    memo->x = Py_NewRef(x);
    memo->store = Py_NewRef((PyObject *)store);
    memo->version = store->version;
    memo->t = t;
}

/* Whether the memo holds x's fold under the store as it is. */
static int
memo_matches(Memo *memo, PyObject *x, ClassStore *store, long long t)
{
    if (memo->x != x || memo->store != (PyObject *)store || memo->version != store->version ||
        memo->t != t || !PyDict_CheckExact(x) || PyDict_GET_SIZE(x) != memo->items.n) {
        return 0;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(x, &pos, &key, &value)) {
        if (i >= memo->items.n || memo->items.items[i].key != key ||
            memo->items.items[i].value != value) {
            return 0;
        }
        i++;
    }
    return i == memo->items.n;
}

/* x's items into the memo, their slots found and the dots folded (averaged: the accumulators'
 * too). 1: done; 0: not handled (the memo empty); -1: error. */
static int
memo_fold(Memo *memo, ClassStore *store, PyObject *x, int averaged)
{
    memo_clear(memo);
    int status = items_load(&memo->items, x);
    if (status <= 0) {
        return status;
    }
    status = store_slots(store, &memo->items);
    if (status <= 0) {
        memo_clear(memo);
        return status;
    }
    store_fold(store, &memo->items, averaged);
    return 1;
}

/* What the fast path reads, checked. */
typedef struct {
    ClassStore *store;
    long long n_seen;
    double max_norm;
    int averaged;
    int forgetting;         /* averaged with a half-life: */
    double half_life, beta; /* as numbers */
    long long avg_ref;
} CoreState;

/* The forgetting average's accumulators are rescaled every RENORMALISE_HALF_LIVES half-lives
 * (_rules.h). */

/* An exact int of at most 2**53 in magnitude, or an exact float, as a double; 0: neither. */
static int
plain_number(PyObject *obj, double *v)
{
    long long iv;
    int is_int;
    return obj != NULL && number_value(obj, v, &iv, &is_int);
}

/* An exact int in 0..limit as a long long; 0: not one. */
static int
count_field(PyObject *obj, long long limit, long long *v)
{
    if (obj == NULL || !PyLong_CheckExact(obj)) {
        return 0;
    }
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || n < 0 || n > limit) {
        return 0;
    }
    *v = n;
    return 1;
}

/* 1: the fast path applies (st filled); 0: the Python method decides. */
static int
core_state(CoreHead *self, CoreState *st)
{
    PyObject *store = self->store;
    if (store == NULL || !Py_IS_TYPE(store, &ClassStoreType)) {
        return 0;
    }
    st->store = (ClassStore *)store;
    if (!count_field(self->n_seen, EXACT_INT_LIMIT - 1, &st->n_seen) ||
        self->max_norm == NULL || !PyFloat_CheckExact(self->max_norm)) {
        return 0;
    }
    st->max_norm = PyFloat_AS_DOUBLE(self->max_norm);
    st->forgetting = 0;
    if (self->averaged == Py_True) {
        if (self->half_life != Py_None) {
            /* the half-life a number, beta a float, 0 <= avg_ref <= n_seen an int */
            if (!plain_number(self->half_life, &st->half_life) || !(st->half_life > 0) ||
                self->beta == NULL || !PyFloat_CheckExact(self->beta) ||
                !count_field(self->avg_ref, st->n_seen, &st->avg_ref)) {
                return 0;
            }
            st->beta = PyFloat_AS_DOUBLE(self->beta);
            st->forgetting = 1;
        }
        st->averaged = 1;
    }
    else if (self->averaged == Py_False) {
        st->averaged = 0;
    }
    else {
        return 0;
    }
    return 1;
}

/* D(t), the divisor of the accumulators in the average after t >= 1 examples, as
 * LinearHyperparameters._avg_div: t, or beta ** (avg_ref - t - 1) (math.pow: the C pow). 0: not
 * a finite non-zero number (Python raises, or divides by zero: its methods decide). */
static int
core_divisor(CoreState *st, long long t, double *d)
{
    if (!st->forgetting) {
        *d = (double)t;
        return 1;
    }
    *d = pow(st->beta, (double)(st->avg_ref - t - 1));
    return isfinite(*d) && *d != 0.0;
}

/* The bias mode: 0 "learned", 1 "r2", 2 "none"; -1 anything else. */
static int
core_bias_mode(CoreHead *self)
{
    PyObject *mode = self->bias_mode;
    if (mode == NULL || !PyUnicode_CheckExact(mode)) {
        return -1;
    }
    if (PyUnicode_CompareWithASCIIString(mode, "learned") == 0) {
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(mode, "r2") == 0) {
        return 1;
    }
    if (PyUnicode_CompareWithASCIIString(mode, "none") == 0) {
        return 2;
    }
    return -1;
}

/* The counters after example t, made before anything changes: *seen = t, *norm = max_norm
 * and, with mistake, *mistakes = n_mistakes + 1. 1: made; 0: not handled; -1: error. */
static int
core_counters(CoreHead *self, long long t, double max_norm, int mistake, PyObject **seen,
              PyObject **norm, PyObject **mistakes)
{
    long long n = 0;
    if (mistake && !count_field(self->n_mistakes, LLONG_MAX - 1, &n)) {
        return 0;
    }
    *seen = PyLong_FromLongLong(t);
    *norm = PyFloat_FromDouble(max_norm);
    *mistakes = mistake ? PyLong_FromLongLong(n + 1) : NULL;
    if (*seen == NULL || *norm == NULL || (mistake && *mistakes == NULL)) {
        Py_CLEAR(*seen);
        Py_CLEAR(*norm);
        Py_CLEAR(*mistakes);
        return -1;
    }
    return 1;
}

/* The counters stored (the references taken over). */
static void
core_store_counters(CoreHead *self, PyObject *seen, PyObject *norm, PyObject *mistakes)
{
    Py_XSETREF(self->n_seen, seen);
    Py_XSETREF(self->max_norm, norm);
    if (mistakes != NULL) {
        Py_XSETREF(self->n_mistakes, mistakes);
    }
    self->fast_steps++;
}

/* The learner's Python method `name` with the arguments given (the reference). */
static PyObject *
core_fallback(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    Py_ssize_t total = 1 + nargs + nkw;
    PyObject *small[8];
    PyObject **stack = small;
    if (total > 8) {
        stack = PyMem_New(PyObject *, total);
        if (stack == NULL) {
            return PyErr_NoMemory();
        }
    }
    stack[0] = self;
    for (Py_ssize_t i = 0; i < nargs + nkw; i++) {
        stack[i + 1] = args[i];
    }
    PyObject *result = PyObject_VectorcallMethod(name, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small) {
        PyMem_Free(stack);
    }
    return result;
}

/* Whether a call has exactly n positional arguments and no keyword. */
static inline int
plain_call(Py_ssize_t nargs, PyObject *kwnames, Py_ssize_t n)
{
    return nargs == n && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0);
}

/* What a method returns when its C path did not give the result: NULL (status < 0, error
 * set), or the learner's Python method `name` (status 0: not handled, nothing changed). */
static PyObject *
core_declined(PyObject *self, int status, PyObject *name, PyObject *const *args,
              Py_ssize_t nargs, PyObject *kwnames)
{
    return status < 0 ? NULL : core_fallback(self, name, args, nargs, kwnames);
}

/* predict_one's pass over x: D(n_seen) into *d when averaged, then x folded (averaged: the
 * accumulators too) into the memo. 1: done; 0: not handled; -1: error. */
static int
core_predict_fold(CoreHead *h, CoreState *st, PyObject *x, int averaged, double *d)
{
    *d = 1.0;
    int status = averaged ? core_divisor(st, st->n_seen, d) : 1;
    return status > 0 ? memo_fold(&h->memo, st->store, x, averaged) : status;
}

/* The fold of x a learning step uses: predict_one's when the memo holds x's (*hit = 1), else
 * x folded anew, plain (*hit = 0). 1: x's items in the memo; 0: not handled; -1: error. */
static int
core_learning_fold(CoreHead *h, ClassStore *store, PyObject *x, long long n_seen, int *hit)
{
    *hit = memo_matches(&h->memo, x, store, n_seen);
    if (*hit) {
        h->memo_hits++;
        return 1;
    }
    return memo_fold(&h->memo, store, x, 0);
}

/* -- the binary perceptron -- */

/* The sign of label y under a settled encoding: 1 or -1; 0: the Python method decides (an
 * encoding not settled, a label outside it); -2: error (from y's hash or eq, as
 * ``dict.get`` raises it). */
static int
binary_sign(BinaryCore *self, PyObject *y)
{
    if (self->labels == NULL) {
        return 0;
    }
    PyObject *settled = PyObject_GetAttr(self->labels, str_settled);
    if (settled == NULL) {
        return -2;
    }
    int is_settled = settled == Py_True;
    Py_DECREF(settled);
    if (!is_settled) {
        return 0;
    }
    PyObject *codes = PyObject_GetAttr(self->labels, str_codes);
    if (codes == NULL) {
        return -2;
    }
    int sign = 0;
    if (PyDict_CheckExact(codes)) {
        PyObject *code = PyDict_GetItemWithError(codes, y);
        if (code == NULL) {
            sign = PyErr_Occurred() ? -2 : 0;
        }
        else if (PyLong_CheckExact(code)) {
            long v = PyLong_AsLong(code);
            sign = v == 1 ? 1 : v == -1 ? -1 : 0;
            if (v == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                sign = 0;
            }
        }
    }
    Py_DECREF(codes);
    return sign;
}

/* The label of a score, as ``labels.positive if score > 0 else labels.negative``. */
static PyObject *
binary_decode(BinaryCore *self, double score)
{
    if (self->labels == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_labels");
        return NULL;
    }
    return PyObject_GetAttr(self->labels, score > 0 ? str_positive : str_negative);
}

/* The bias and (averaged) its accumulator as floats; 0: not exact floats. */
static int
binary_biases(BinaryCore *self, CoreState *st, double *b, double *ub)
{
    if (self->b == NULL || !PyFloat_CheckExact(self->b)) {
        return 0;
    }
    *b = PyFloat_AS_DOUBLE(self->b);
    *ub = 0.0;
    if (st->averaged) {
        if (self->ub == NULL || !PyFloat_CheckExact(self->ub)) {
            return 0;
        }
        *ub = PyFloat_AS_DOUBLE(self->ub);
    }
    return 1;
}

/* 1: the fast path applies to the binary learner (st, *b, *ub filled); 0: Python decides. */
static int
binary_state(BinaryCore *self, CoreState *st, double *b, double *ub)
{
    return core_state(&self->h, st) && st->store->nc >= 1 && binary_biases(self, st, b, ub);
}

/* The learner's rule (_rules.h) from its fields, st, b and ub read by binary_state. *lr_ok
 * 0: lr or the bias mode not one the rule takes (a mistake is then Python's). */
static void
binary_rule_of(BinaryCore *self, const CoreState *st, double b, double ub, BinaryRule *r,
               int *lr_ok)
{
    Num lr = {NAN, 0, 0};
    r->bias_mode = core_bias_mode(&self->h);
    *lr_ok = num_value(self->h.lr, &lr) && r->bias_mode >= 0;
    r->lr = lr.v;
    r->lr_int = lr.is_int;
    r->averaged = st->averaged;
    r->half_life = st->forgetting ? st->half_life : 0.0;
    r->beta = st->forgetting ? st->beta : 0.0;
    r->b = b;
    r->ub = ub;
    r->max_norm = st->max_norm;
    r->n_seen = st->n_seen;
    r->n_mistakes = 0; /* the learner's counter is core_counters' */
    r->avg_ref = st->forgetting ? st->avg_ref : 0;
}

/*
 * Perceptron._learn(x, sign) on the store, by the rule (_rules.h): the score before learning
 * into *score. With known_dot, x's items are in the memo with their slots found and this dot
 * folded; without, the memo's fold is used when it is x's, else x is folded. 1: learned; 0:
 * not handled (nothing changed: Python decides, and refuses what the rule refuses); -1:
 * error. The memo is empty afterwards.
 */
static int
binary_learn(BinaryCore *self, CoreState *st, double b0, double ub0, PyObject *x, int sign,
             const double *known_dot, double *score)
{
    CoreHead *h = &self->h;
    ClassStore *store = st->store;
    double dot;
    if (known_dot != NULL) {
        dot = *known_dot;
    }
    else {
        int hit, status = core_learning_fold(h, store, x, st->n_seen, &hit);
        if (status <= 0) {
            return status;
        }
        dot = hit ? h->memo.dot : store->dot[0];
    }
    Items *it = &h->memo.items;
    int result = 0, lr_ok;
    PyObject *new_b = NULL, *new_ub = NULL, *new_ref = NULL;
    PyObject *seen = NULL, *norm = NULL, *mistakes = NULL;
    BinaryRule r;
    BinaryStep s = {0};
    binary_rule_of(self, st, b0, ub0, &r, &lr_ok);
    if (!binary_rule_learn(&r, sign, dot + b0, items_sq(it), &s) ||
        (s.mistake && (!lr_ok || !(fabs(s.cstep) <= RULE_EXACT_INT || !s.cstep_int)))) {
        goto done; /* refused, or a step Python computes exactly and a double cannot */
    }
    *score = dot + b0;
    result = core_counters(h, s.t, s.max_norm, s.mistake, &seen, &norm, &mistakes);
    if (result <= 0) {
        goto done;
    }
    binary_rule_commit(&r, &s);
    double factor = binary_rule_renormalise(&r, s.t);
    int new_biases = s.mistake || factor != 0.0;
    if (new_biases) {
        new_b = PyFloat_FromDouble(r.b);
        new_ub = st->averaged ? PyFloat_FromDouble(r.ub) : NULL;
    }
    new_ref = factor != 0.0 ? PyLong_FromLongLong(r.avg_ref) : NULL;
    if ((new_biases && (new_b == NULL || (st->averaged && new_ub == NULL))) ||
        (factor != 0.0 && new_ref == NULL)) {
        result = -1;
        goto done;
    }
    if (s.mistake) {
        int status = store_binary_update(store, it, &s);
        if (status != UPDATE_DONE) {
            result = status == UPDATE_ERROR ? -1 : 0;
            goto done;
        }
    }
    if (factor != 0.0) {
        store_rescale_by(store, factor);
        Py_XSETREF(h->avg_ref, new_ref);
        new_ref = NULL;
    }
    if (new_b != NULL) {
        Py_XSETREF(self->b, new_b);
        new_b = NULL;
    }
    if (new_ub != NULL) {
        Py_XSETREF(self->ub, new_ub);
        new_ub = NULL;
    }
    core_store_counters(h, seen, norm, mistakes);
    seen = norm = mistakes = NULL;
    result = 1;
done:
    Py_XDECREF(new_b);
    Py_XDECREF(new_ub);
    Py_XDECREF(new_ref);
    Py_XDECREF(seen);
    Py_XDECREF(norm);
    Py_XDECREF(mistakes);
    memo_clear(&h->memo);
    return result;
}

/* learn_one's and predict_learn_one's checks: the state (st, *b, *ub) and y's sign (*sign),
 * the state read again after the sign (y's hash or eq may have run Python code). 1: the fast
 * path applies; 0: the Python method decides; -1: error. */
static int
binary_begin(BinaryCore *self, Py_ssize_t nargs, PyObject *kwnames, PyObject *y, CoreState *st,
             double *b, double *ub, int *sign)
{
    if (!plain_call(nargs, kwnames, 2) || !binary_state(self, st, b, ub)) {
        return 0;
    }
    *sign = binary_sign(self, y);
    if (*sign == -2) {
        return -1;
    }
    return *sign != 0 && binary_state(self, st, b, ub);
}

PyDoc_STRVAR(core_predict_one_doc,
"predict_one(x, **kwargs)\n"
"--\n"
"\n"
"The label predicted for x (see the learner's documentation).");

static PyObject *
binary_predict_one(BinaryCore *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    CoreState st;
    double b, ub;
    if (!plain_call(nargs, kwnames, 1) || !binary_state(self, &st, &b, &ub)) {
        return core_fallback((PyObject *)self, str_predict_one_py, args, nargs, kwnames);
    }
    PyObject *x = args[0];
    int averaged = st.averaged && st.n_seen;
    double d;
    int status = core_predict_fold(&self->h, &st, x, averaged, &d);
    if (status <= 0) {
        return core_declined((PyObject *)self, status, str_predict_one_py, args, nargs, kwnames);
    }
    double dot = st.store->dot[0];
    double score = dot + b;
    if (averaged) {
        score = score - (st.store->udot[0] + ub) / d;
    }
    memo_keep(&self->h.memo, x, st.store, st.n_seen);
    self->h.memo.dot = dot;
    return binary_decode(self, score);
}

PyDoc_STRVAR(core_learn_one_doc,
"learn_one(x, y)\n"
"--\n"
"\n"
"Learn from the example (x, y) (see the learner's documentation).");

static PyObject *
binary_learn_one(BinaryCore *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    CoreState st;
    double b, ub, score;
    int sign;
    int status = binary_begin(self, nargs, kwnames, nargs == 2 ? args[1] : NULL, &st, &b, &ub,
                              &sign);
    if (status > 0) {
        status = binary_learn(self, &st, b, ub, args[0], sign, NULL, &score);
    }
    if (status <= 0) {
        return core_declined((PyObject *)self, status, str_learn_one_py, args, nargs, kwnames);
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(core_predict_learn_one_doc,
"predict_learn_one(x, y)\n"
"--\n"
"\n"
"Predict x as predict_one would, then learn (x, y); return the prediction.");

/* predict_learn_one's C path: the prediction's score before learning into *prediction. 1:
 * learned; 0: not handled (nothing changed); -1: error. */
static int
binary_fused(BinaryCore *self, CoreState *st, double b, double ub, PyObject *x, int sign,
             double *prediction)
{
    double score;
    if (!st->averaged) {
        int status = binary_learn(self, st, b, ub, x, sign, NULL, &score);
        *prediction = score;
        return status;
    }
    if (st->n_seen == 0) {
        return 0; /* the first example: Python's _predict_before_learning */
    }
    double d;
    int status = core_predict_fold(&self->h, st, x, 1, &d);
    if (status <= 0) {
        return status;
    }
    double dot = st->store->dot[0];
    *prediction = (dot + b) - (st->store->udot[0] + ub) / d;
    return binary_learn(self, st, b, ub, x, sign, &dot, &score);
}

static PyObject *
binary_predict_learn_one(BinaryCore *self, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    CoreState st;
    double b, ub, prediction = 0.0;
    int sign;
    int status = binary_begin(self, nargs, kwnames, nargs == 2 ? args[1] : NULL, &st, &b, &ub,
                              &sign);
    if (status > 0) {
        status = binary_fused(self, &st, b, ub, args[0], sign, &prediction);
    }
    if (status <= 0) {
        return core_declined((PyObject *)self, status, str_predict_learn_one_py, args, nargs,
                             kwnames);
    }
    return binary_decode(self, prediction);
}

/* -- the multi-class perceptron -- */

/* The plain argmax (and, averaged, the averaged one) of the store's folded dots, as the store's
 * class_argmax and avg_class_argmax choose them (the first best wins; a class None is beaten by
 * any later class). */
static void FOLD_CLONES
store_best(ClassStore *store, int averaged, double d, Py_ssize_t *best, Py_ssize_t *abest)
{
    Py_ssize_t nc = store->nc;
    const double *restrict dot = store->dot, *restrict B = store->B, *restrict UB = store->UB;
    double *restrict udot = store->udot;
    if (averaged) {
        /* the averaged scores (into the scratch udot) in a loop of their own, which the
         * compiler vectorises: two divisions an instruction, each exact */
        for (Py_ssize_t c = 0; c < nc; c++) {
            udot[c] = (dot[c] + B[c]) - (udot[c] + UB[c]) / d;
        }
    }
    int none_free = nc > 0;
    for (Py_ssize_t c = 0; c < nc; c++) {
        none_free &= PyList_GET_ITEM(store->labels, c) != Py_None;
    }
    if (none_free) {
        /* no class None (the usual case): the first best without a branch on the scores (a
         * branch there, taken at random classes, missed about twice a track: measured as 30
         * ns of the averaged model's 340); x > y ? x : y keeps y when x is NaN, as the
         * loop below does */
        Py_ssize_t b = 0, a = 0;
        double bs = dot[0] + B[0], as = udot[0];
        for (Py_ssize_t c = 1; c < nc; c++) {
            double s = dot[c] + B[c];
            int take = s > bs;
            b = take ? c : b;
            bs = take ? s : bs;
            if (averaged) {
                double u = udot[c];
                int atake = u > as;
                a = atake ? c : a;
                as = atake ? u : as;
            }
        }
        *best = b;
        *abest = averaged ? a : -1;
        return;
    }
    double best_score = -INFINITY, abest_score = -INFINITY;
    *best = *abest = -1;
    for (Py_ssize_t c = 0; c < nc; c++) {
        double s = dot[c] + B[c];
        if (store_no_best(store, *best) || s > best_score) {
            *best = c;
            best_score = s;
        }
        if (averaged && (store_no_best(store, *abest) || udot[c] > abest_score)) {
            *abest = c;
            abest_score = udot[c];
        }
    }
}

static PyObject *
store_label(ClassStore *store, Py_ssize_t row)
{
    return row < 0 ? Py_None : PyList_GET_ITEM(store->labels, row);
}

/* Whether y is a label the fast path takes: an exact str, or an exact int when no class is a
 * bool (where _learn_stored checks the class kinds). */
static int
multiclass_label(MulticlassCore *self, PyObject *y)
{
    return PyUnicode_CheckExact(y) || (PyLong_CheckExact(y) && self->bool_classes == Py_False);
}

/*
 * MulticlassPerceptron._learn_stored(store, x, y, known) in C: the plain prediction before
 * learning into *y_hat (borrowed). With known_best, x's items are in the memo with their slots
 * found and this argmax row folded; without, the memo's fold is used when it is x's, else x is
 * folded. 1: learned; 0: not handled (nothing changed); -1: error. The memo is empty after.
 */
static int
multiclass_learn(MulticlassCore *self, CoreState *st, PyObject *x, PyObject *y,
                 const Py_ssize_t *known_best, PyObject **y_hat)
{
    CoreHead *h = &self->h;
    ClassStore *store = st->store;
    Py_ssize_t best, unused;
    if (known_best != NULL) {
        best = *known_best;
    }
    else {
        int hit, status = core_learning_fold(h, store, x, st->n_seen, &hit);
        if (status <= 0) {
            return status;
        }
        best = h->memo.best;
        if (!hit) {
            store_best(store, 0, 1.0, &best, &unused);
        }
    }
    Items *it = &h->memo.items;
    int result = 0;
    PyObject *seen = NULL, *norm = NULL, *mistakes = NULL, *new_ref = NULL;
    /* x's squared norm first: its fold's chain of additions runs while the labels are
     * compared and looked up (nothing below depends on it until the rule) */
    double sq = items_sq(it);
    PyObject *predicted = store_label(store, best);
    /* y_hat == y and y_hat is not None and y in store.classes: the label classes are compared
     * only when they are plain values (no Python code runs) */
    int right = 0;
    if (predicted != Py_None) {
        if (!(PyUnicode_CheckExact(predicted) || PyLong_CheckExact(predicted) ||
              PyFloat_CheckExact(predicted) || PyBool_Check(predicted))) {
            goto done;
        }
        right = PyObject_RichCompareBool(predicted, y, Py_EQ);
        if (right < 0) {
            result = -1;
            goto done;
        }
    }
    Py_ssize_t ry = store_row(store, y);
    if (ry == -2) {
        result = -1;
        goto done;
    }
    right = right && ry >= 0;
    Py_ssize_t rh = predicted == Py_None ? -1 : best;
    if (!right && ry >= 0 && ry == rh) {
        goto done; /* the rows agree and the labels not: Python decides */
    }
    /* the rule (_rules.h): the true class's code ry, or nc for a new one; the predicted rh */
    Num lr = {NAN, 0, 0};
    MultiRule r;
    r.bias_mode = right ? 0 : core_bias_mode(h); /* (only a mistake reads lr and the mode) */
    int lr_ok = right || (num_value(h->lr, &lr) && r.bias_mode >= 0);
    r.lr = lr.v;
    r.lr_int = lr.is_int;
    r.averaged = st->averaged;
    r.half_life = st->forgetting ? st->half_life : 0.0;
    r.beta = st->forgetting ? st->beta : 0.0;
    r.max_norm = st->max_norm;
    r.n_seen = st->n_seen;
    r.n_mistakes = 0; /* the learner's counter is core_counters' */
    r.avg_ref = st->forgetting ? st->avg_ref : 0;
    r.n_active = store->nc;
    MultiStep s;
    if (!multi_rule_learn(&r, ry >= 0 ? ry : store->nc, rh, sq, store->B, store->UB, &s) ||
        (s.mistake && !lr_ok)) {
        goto done; /* refused (Python raises), or a rule Python's code decides */
    }
    result = core_counters(h, s.t, s.max_norm, s.mistake, &seen, &norm, &mistakes);
    if (result <= 0) {
        goto done;
    }
    result = 0;
    long long avg_ref = r.avg_ref;
    double factor = rule_renormalise(r.half_life, r.beta, &avg_ref, s.t);
    if (factor != 0.0 && (new_ref = PyLong_FromLongLong(avg_ref)) == NULL) {
        result = -1;
        goto done;
    }
    if (s.mistake) {
        int status = store_multi_update(store, it, y, ry, rh, &s);
        if (status != UPDATE_DONE) {
            result = status == UPDATE_ERROR ? -1 : 0;
            goto done;
        }
    }
    if (factor != 0.0) {
        store_rescale_by(store, factor);
        Py_XSETREF(h->avg_ref, new_ref);
        new_ref = NULL;
    }
    core_store_counters(h, seen, norm, mistakes);
    seen = norm = mistakes = NULL;
    *y_hat = predicted;
    result = 1;
done:
    Py_XDECREF(seen);
    Py_XDECREF(norm);
    Py_XDECREF(mistakes);
    Py_XDECREF(new_ref);
    memo_clear(&h->memo);
    return result;
}

static PyObject *
multiclass_predict_one(MulticlassCore *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    CoreState st;
    if (!plain_call(nargs, kwnames, 1) || !core_state(&self->h, &st)) {
        return core_fallback((PyObject *)self, str_predict_one_py, args, nargs, kwnames);
    }
    PyObject *x = args[0];
    int averaged = st.averaged && st.n_seen;
    double d;
    int status = core_predict_fold(&self->h, &st, x, averaged, &d);
    if (status <= 0) {
        return core_declined((PyObject *)self, status, str_predict_one_py, args, nargs, kwnames);
    }
    Py_ssize_t best, abest;
    store_best(st.store, averaged, d, &best, &abest);
    memo_keep(&self->h.memo, x, st.store, st.n_seen);
    self->h.memo.best = best;
    return Py_NewRef(store_label(st.store, averaged ? abest : best));
}

static PyObject *
multiclass_learn_one(MulticlassCore *self, PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames)
{
    CoreState st;
    if (!plain_call(nargs, kwnames, 2) || !multiclass_label(self, args[1]) ||
        !core_state(&self->h, &st)) {
        return core_fallback((PyObject *)self, str_learn_one_py, args, nargs, kwnames);
    }
    PyObject *y_hat;
    int status = multiclass_learn(self, &st, args[0], args[1], NULL, &y_hat);
    if (status <= 0) {
        return core_declined((PyObject *)self, status, str_learn_one_py, args, nargs, kwnames);
    }
    Py_RETURN_NONE;
}

static PyObject *
multiclass_predict_learn_one(MulticlassCore *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    CoreState st;
    if (!plain_call(nargs, kwnames, 2) || !multiclass_label(self, args[1]) ||
        !core_state(&self->h, &st) || (st.averaged && st.n_seen == 0)) {
        return core_fallback((PyObject *)self, str_predict_learn_one_py, args, nargs, kwnames);
    }
    PyObject *y_hat, *prediction = NULL;
    int status;
    if (st.averaged) {
        double d;
        status = core_predict_fold(&self->h, &st, args[0], 1, &d);
        if (status > 0) {
            Py_ssize_t best, abest;
            store_best(st.store, 1, d, &best, &abest);
            prediction = store_label(st.store, abest);
            status = multiclass_learn(self, &st, args[0], args[1], &best, &y_hat);
        }
    }
    else {
        status = multiclass_learn(self, &st, args[0], args[1], NULL, &y_hat);
        prediction = y_hat;
    }
    if (status <= 0) {
        return core_declined((PyObject *)self, status, str_predict_learn_one_py, args, nargs,
                             kwnames);
    }
    /* a class's label is held by the store's list, which only grows */
    return Py_NewRef(prediction);
}

/* -- the types -- */

static PyObject *
core_get_fast_steps(CoreHead *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->fast_steps);
}

static PyObject *
core_get_memo_hits(CoreHead *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->memo_hits);
}

static PyGetSetDef core_getset[] = {
    {"_fast_steps", (getter)core_get_fast_steps, NULL,
     "Examples this object learned in C (not by the Python methods): for the tests.", NULL},
    {"_memo_hits", (getter)core_get_memo_hits, NULL,
     "Learning steps that used predict_one's fold of the same dict: for the tests.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define HEAD_MEMBERS(T)                                                                         \
    {"_n_seen", MEMBER_OBJECT, offsetof(T, h.n_seen), 0, "Examples learned from."},            \
    {"_n_mistakes", MEMBER_OBJECT, offsetof(T, h.n_mistakes), 0, "Mistakes made."},            \
    {"_max_norm", MEMBER_OBJECT, offsetof(T, h.max_norm), 0, "R."},                            \
    {"_store", MEMBER_OBJECT, offsetof(T, h.store), 0, "The ClassStore, or None."},            \
    {"lr", MEMBER_OBJECT, offsetof(T, h.lr), 0, "The learning rate."},                         \
    {"_bias_mode", MEMBER_OBJECT, offsetof(T, h.bias_mode), 0, "The bias mode."},              \
    {"averaged", MEMBER_OBJECT, offsetof(T, h.averaged), 0, "Averaged or not."},               \
    {"average_half_life", MEMBER_OBJECT, offsetof(T, h.half_life), 0,                         \
     "The forgetting average's half-life, or None."},                                          \
    {"_avg_ref", MEMBER_OBJECT, offsetof(T, h.avg_ref), 0,                                     \
     "The forgetting average's reference example."},                                           \
    {"_beta", MEMBER_OBJECT, offsetof(T, h.beta), 0,                                           \
     "The forgetting average's factor an example."}

static PyMemberDef binary_members[] = {
    HEAD_MEMBERS(BinaryCore),
    {"_b", MEMBER_OBJECT, offsetof(BinaryCore, b), 0, "The bias b."},
    {"_ub", MEMBER_OBJECT, offsetof(BinaryCore, ub), 0, "The bias's averaging accumulator."},
    {"_labels", MEMBER_OBJECT, offsetof(BinaryCore, labels), 0, "The label encoding."},
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef multiclass_members[] = {
    HEAD_MEMBERS(MulticlassCore),
    {"_bool_classes", MEMBER_OBJECT, offsetof(MulticlassCore, bool_classes), 0,
     "Whether a class is a bool (then an int label is checked against it)."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef binary_methods[] = {
    {"predict_one", (PyCFunction)(void (*)(void))binary_predict_one,
     METH_FASTCALL | METH_KEYWORDS, core_predict_one_doc},
    {"learn_one", (PyCFunction)(void (*)(void))binary_learn_one, METH_FASTCALL | METH_KEYWORDS,
     core_learn_one_doc},
    {"predict_learn_one", (PyCFunction)(void (*)(void))binary_predict_learn_one,
     METH_FASTCALL | METH_KEYWORDS, core_predict_learn_one_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef multiclass_methods[] = {
    {"predict_one", (PyCFunction)(void (*)(void))multiclass_predict_one,
     METH_FASTCALL | METH_KEYWORDS, core_predict_one_doc},
    {"learn_one", (PyCFunction)(void (*)(void))multiclass_learn_one,
     METH_FASTCALL | METH_KEYWORDS, core_learn_one_doc},
    {"predict_learn_one", (PyCFunction)(void (*)(void))multiclass_predict_learn_one,
     METH_FASTCALL | METH_KEYWORDS, core_predict_learn_one_doc},
    {NULL, NULL, 0, NULL},
};

static PyObject *
core_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    CoreHead *self = (CoreHead *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->memo.items.items = self->memo.items.stack;
    self->memo.items.n = 0;
    self->memo.best = -1;
    self->store = Py_NewRef(Py_None);
    return (PyObject *)self;
}

static int
head_traverse(CoreHead *self, visitproc visit, void *arg)
{
    Py_VISIT(self->n_seen);
    Py_VISIT(self->n_mistakes);
    Py_VISIT(self->max_norm);
    Py_VISIT(self->store);
    Py_VISIT(self->lr);
    Py_VISIT(self->bias_mode);
    Py_VISIT(self->averaged);
    Py_VISIT(self->half_life);
    Py_VISIT(self->avg_ref);
    Py_VISIT(self->beta);
    Py_VISIT(self->memo.x);
    Py_VISIT(self->memo.store);
    for (Py_ssize_t i = 0; i < self->memo.items.n; i++) {
        Py_VISIT(self->memo.items.items[i].key);
        Py_VISIT(self->memo.items.items[i].value);
    }
    return 0;
}

static void
head_clear(CoreHead *self)
{
    memo_clear(&self->memo);
    Py_CLEAR(self->n_seen);
    Py_CLEAR(self->n_mistakes);
    Py_CLEAR(self->max_norm);
    Py_CLEAR(self->store);
    Py_CLEAR(self->lr);
    Py_CLEAR(self->bias_mode);
    Py_CLEAR(self->averaged);
    Py_CLEAR(self->half_life);
    Py_CLEAR(self->avg_ref);
    Py_CLEAR(self->beta);
}

static int
binary_traverse(BinaryCore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->b);
    Py_VISIT(self->ub);
    Py_VISIT(self->labels);
    return head_traverse(&self->h, visit, arg);
}

static int
binary_clear(BinaryCore *self)
{
    head_clear(&self->h);
    Py_CLEAR(self->b);
    Py_CLEAR(self->ub);
    Py_CLEAR(self->labels);
    return 0;
}

static void
binary_dealloc(BinaryCore *self)
{
    PyObject_GC_UnTrack(self);
    binary_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
multiclass_traverse(MulticlassCore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->bool_classes);
    return head_traverse(&self->h, visit, arg);
}

static int
multiclass_clear(MulticlassCore *self)
{
    head_clear(&self->h);
    Py_CLEAR(self->bool_classes);
    return 0;
}

static void
multiclass_dealloc(MulticlassCore *self)
{
    PyObject_GC_UnTrack(self);
    multiclass_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(binary_core_doc,
"BinaryCore()\n"
"--\n"
"\n"
"The base of the binary Perceptron: its scalars as fields, and predict_one, learn_one and\n"
"predict_learn_one in C for the usual case, the learner's Python methods for the rest (see\n"
"the comment in _speedups.c).");

static PyTypeObject BinaryCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stream_perceptron._speedups.BinaryCore",
    .tp_basicsize = sizeof(BinaryCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = binary_core_doc,
    .tp_new = core_new,
    .tp_dealloc = (destructor)binary_dealloc,
    .tp_traverse = (traverseproc)binary_traverse,
    .tp_clear = (inquiry)binary_clear,
    .tp_methods = binary_methods,
    .tp_members = binary_members,
    .tp_getset = core_getset,
};

PyDoc_STRVAR(multiclass_core_doc,
"MulticlassCore()\n"
"--\n"
"\n"
"The base of MulticlassPerceptron: its counters and hyperparameters as fields, and\n"
"predict_one, learn_one and predict_learn_one in C for the usual case, the learner's Python\n"
"methods for the rest (see the comment in _speedups.c).");

static PyTypeObject MulticlassCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stream_perceptron._speedups.MulticlassCore",
    .tp_basicsize = sizeof(MulticlassCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = multiclass_core_doc,
    .tp_new = core_new,
    .tp_dealloc = (destructor)multiclass_dealloc,
    .tp_traverse = (traverseproc)multiclass_traverse,
    .tp_clear = (inquiry)multiclass_clear,
    .tp_methods = multiclass_methods,
    .tp_members = multiclass_members,
    .tp_getset = core_getset,
};

static PyMethodDef speedups_methods[] = {
    {"dot_norm", (PyCFunction)(void (*)(void))dot_norm, METH_FASTCALL, dot_norm_doc},
    {"dot_sq", (PyCFunction)(void (*)(void))dot_sq, METH_FASTCALL, dot_sq_doc},
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
    if (PyType_Ready(&ClassStoreType) < 0 || PyType_Ready(&BinaryCoreType) < 0 ||
        PyType_Ready(&MulticlassCoreType) < 0) {
        return -1;
    }
    PyObject **strings[] = {&str_positive, &str_negative, &str_settled, &str_codes,
                            &str_predict_one_py, &str_learn_one_py, &str_predict_learn_one_py};
    const char *names[] = {"positive", "negative", "settled", "_codes",
                           "_predict_one_py", "_learn_one_py", "_predict_learn_one_py"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*strings[i] == NULL && (*strings[i] = PyUnicode_InternFromString(names[i])) == NULL) {
            return -1;
        }
    }
    if (PyModule_AddObjectRef(module, "ClassStore", (PyObject *)&ClassStoreType) < 0) {
        return -1;
    }
    if (PyModule_AddObjectRef(module, "BinaryCore", (PyObject *)&BinaryCoreType) < 0) {
        return -1;
    }
    return PyModule_AddObjectRef(module, "MulticlassCore", (PyObject *)&MulticlassCoreType);
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
