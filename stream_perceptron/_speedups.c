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
    if (check_nargs("dot_norm", nargs, 2, 3) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *x = args[1];
    int want_snapshot = 0;
    if (nargs == 3 && (want_snapshot = PyObject_IsTrue(args[2])) < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(w)) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double dot = 0.0;
    status = items_dot(&it, w, &dot);
    if (status <= 0) {
        items_release(&it);
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double r = items_norm(&it);
    if (!want_snapshot) {
        items_release(&it);
        return pack(PyFloat_FromDouble(dot), PyFloat_FromDouble(r), NULL);
    }
    PyObject *snap = items_snapshot(&it);
    if (snap == NULL) {
        return NULL;
    }
    return pack(PyFloat_FromDouble(dot), PyFloat_FromDouble(r), snap);
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
    if (check_nargs("class_argmax", nargs, 3, 4) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *b = args[1], *x = args[2];
    int want_snapshot = 0;
    if (nargs == 4 && (want_snapshot = PyObject_IsTrue(args[3])) < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(b)) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double r = items_norm(&it);
    PyObject *best = NULL;
    status = class_scores(&it, w, b, &best, NULL);
    if (status <= 0) {
        items_release(&it);
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (!want_snapshot) {
        items_release(&it);
        return pack(best, PyFloat_FromDouble(r), NULL);
    }
    PyObject *snap = items_snapshot(&it);
    if (snap == NULL) {
        Py_DECREF(best);
        return NULL;
    }
    return pack(best, PyFloat_FromDouble(r), snap);
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
    if (check_nargs("class_scores", nargs, 3, 3) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *b = args[1], *x = args[2];
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(b)) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *scores = PyDict_New();
    if (scores == NULL) {
        items_release(&it);
        return NULL;
    }
    status = class_scores(&it, w, b, NULL, scores);
    items_release(&it);
    if (status <= 0) {
        Py_DECREF(scores);
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return scores;
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
    if (check_nargs("avg_dot_norm", nargs, 3, 4) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *u = args[1], *x = args[2];
    int want_snapshot = 0;
    if (nargs == 4 && (want_snapshot = PyObject_IsTrue(args[3])) < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(u)) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double dot = 0.0, udot = 0.0;
    status = items_avg_dot(&it, w, u, &dot, &udot);
    if (status <= 0) {
        items_release(&it);
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double r = items_norm(&it);
    PyObject *inner;
    if (!want_snapshot) {
        items_release(&it);
        inner = pack(PyFloat_FromDouble(dot), PyFloat_FromDouble(r), NULL);
    }
    else {
        PyObject *snap = items_snapshot(&it);
        if (snap == NULL) {
            return NULL;
        }
        inner = pack(PyFloat_FromDouble(dot), PyFloat_FromDouble(r), snap);
    }
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
    if (check_nargs("avg_class_argmax", nargs, 6, 7) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *b = args[1], *u = args[2], *ub = args[3], *x = args[5];
    int want_snapshot = 0;
    if (nargs == 7 && (want_snapshot = PyObject_IsTrue(args[6])) < 0) {
        return NULL;
    }
    double t;
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(b) || !PyDict_CheckExact(u) ||
        !PyDict_CheckExact(ub) || !count_value(args[4], &t)) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    double r = items_norm(&it);
    PyObject *best = NULL, *abest = NULL;
    status = class_avg_scores(&it, w, b, u, ub, t, &best, &abest, NULL);
    if (status <= 0) {
        items_release(&it);
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *inner;
    if (!want_snapshot) {
        items_release(&it);
        inner = pack(best, PyFloat_FromDouble(r), NULL);
    }
    else {
        PyObject *snap = items_snapshot(&it);
        if (snap == NULL) {
            Py_DECREF(best);
            Py_DECREF(abest);
            return NULL;
        }
        inner = pack(best, PyFloat_FromDouble(r), snap);
    }
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
    if (check_nargs("avg_class_scores", nargs, 6, 6) < 0) {
        return NULL;
    }
    PyObject *w = args[0], *b = args[1], *u = args[2], *ub = args[3], *x = args[5];
    double t;
    if (!PyDict_CheckExact(w) || !PyDict_CheckExact(b) || !PyDict_CheckExact(u) ||
        !PyDict_CheckExact(ub) || !count_value(args[4], &t)) {
        Py_RETURN_NONE;
    }
    Items it;
    int status = items_load(&it, x);
    if (status <= 0) {
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *scores = PyDict_New();
    if (scores == NULL) {
        items_release(&it);
        return NULL;
    }
    status = class_avg_scores(&it, w, b, u, ub, t, NULL, NULL, scores);
    items_release(&it);
    if (status <= 0) {
        Py_DECREF(scores);
        if (status < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return scores;
}

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

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "stream_perceptron._speedups",
    module_doc,
    0,
    speedups_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
