/*
 * stream_perceptron/_rules.h: the learning rules in C, each once, beside their Python
 * references (learners/perceptron.py: Perceptron._learn and predict_one).
 *
 * Included by both C extensions: _speedups.c (the dict API: an example is a row of one, its
 * cells in the learner's ClassStore) and _dense.c (blocks: a dense row is the row whose slots
 * are 0..d-1, a sparse row lists its slots; the cells are the block's arrays). Each path only
 * says where a row's cells are (RuleCells) and what the row is (RuleRow); the arithmetic, its
 * order and its checks are here. Everything is inlined into the callers, the row's kind a
 * constant there, so a dense row pays no slot lookups.
 *
 * The operations are those of the Python reference, in its order, each rounded once (the
 * extensions are built with -ffp-contract=off): a dot is a left fold from +0.0 in the row's
 * order over the cells the model has; a mistake adds step*v to each of the row's weights and,
 * averaging, (c(t)*step)*v to each accumulator. Python ints (the dict API's values and an int
 * lr) follow Python's rules: an int times an int is exact, so a zero product is +0.0, never
 * -0.0 (every other such product, of ints of at most 2**53, is the correctly rounded double
 * product, which is what Python's conversion of the exact product gives).
 */
#ifndef STREAM_PERCEPTRON_RULES_H
#define STREAM_PERCEPTRON_RULES_H

#include <math.h>
#include <stdint.h>

#define RULE_INLINE static inline __attribute__((always_inline))

/* A cell's presence bits: its weight, its accumulator is in the model's dict. */
#define RULE_W 1
#define RULE_U 2

/* The forgetting average's accumulators are rescaled every RENORMALISE_HALF_LIVES half-lives
 * (learners/_linear.py's LinearHyperparameters). */
#define RENORMALISE_HALF_LIVES 256.0

/* 2**53: a step of an int lr times an int c(t) past it is not exact as a double. */
#define RULE_EXACT_INT 9007199254740992.0

/* -- the cells and the rows ---------------------------------------------------------------- */

/* Where a row's cells are: slot j's weight w[j * stride], accumulator u[j * stride], presence
 * bits present[j * stride] (RULE_W, RULE_U). A cell the model lacks holds +0.0 (what
 * ``d.get(k, 0.0)`` gives). The slots whose weight or accumulator joins the model are appended
 * to joined_w, joined_u (room for every slot of a row: the caller's), in the order they join,
 * which is the order the keys enter the model's dicts. all_w: every slot the rows reach has
 * its weight (a dense block after its first update: no presence bytes read). */
typedef struct {
    double *w, *u;
    unsigned char *present;
    Py_ssize_t stride;
    Py_ssize_t *joined_w, *joined_u;
    Py_ssize_t n_joined_w, n_joined_u;
    int all_w;
} RuleCells;

/* A row of n (slot, value) pairs: the slots slots32[k] or slots[k] or, neither given, k (a
 * dense row); the values values[k], or values32[k] (float32, each the double it is exactly);
 * is_int: NULL, or whether value k is a Python int. */
typedef struct {
    Py_ssize_t n;
    const int32_t *slots32;
    const Py_ssize_t *slots;
    const double *values;
    const float *values32;
    const unsigned char *is_int;
} RuleRow;

RULE_INLINE Py_ssize_t rule_slot(const RuleRow *row, Py_ssize_t k)
{
    return row->slots32 ? (Py_ssize_t)row->slots32[k] : row->slots ? row->slots[k] : k;
}

RULE_INLINE double rule_value(const RuleRow *row, Py_ssize_t k)
{
    return row->values32 ? (double)row->values32[k] : row->values[k];
}

/* step * v, step an exact int when step_int: Python's product (an int zero gives +0.0). */
RULE_INLINE double rule_product(double step, int step_int, const RuleRow *row, Py_ssize_t k,
                                double v)
{
    if (row->is_int && step_int && row->is_int[k] && (step == 0.0 || v == 0.0))
        return 0.0;
    return step * v;
}

/* a * b for two numbers, each an exact int when its flag says so: Python's product. */
RULE_INLINE double rule_mul(double a, int a_int, double b, int b_int)
{
    return a_int && b_int && (a == 0.0 || b == 0.0) ? 0.0 : a * b;
}

/* -- the binary perceptron ----------------------------------------------------------------- */

/* The binary perceptron's hyperparameters and scalars: the learner's fields, read once per
 * call and given back after it. */
typedef struct {
    double lr;
    int lr_int;    /* lr is a Python int (of at most 2**53) */
    int bias_mode; /* 0 "learned", 1 "r2", 2 "none" */
    int averaged;
    double half_life; /* > 0: the forgetting average, beta its factor; 0: the plain average */
    double beta;
    double b, ub, max_norm;
    long long n_seen, n_mistakes, avg_ref;
} BinaryRule;

/* What learning a labelled row decided, before anything is stored. */
typedef struct {
    long long t;
    int mistake, averaging;
    double step, cstep; /* the steps of the weights (lr*y) and accumulators (c(t)*step) */
    int step_int, cstep_int;
    double b, ub, max_norm;
} BinaryStep;

/* D(t), the divisor of the accumulators in the average after t >= 1 examples
 * (LinearHyperparameters._avg_div): t, or beta ** (avg_ref - t - 1) when forgetting. */
RULE_INLINE double binary_rule_divisor(const BinaryRule *r, long long t)
{
    return r->half_life > 0.0 ? pow(r->beta, (double)(r->avg_ref - t - 1)) : (double)t;
}

/* The score predict_one decides on: the plain score, or the averaged one once the model has
 * learned (dot, udot: the row's folds over the weights and accumulators). */
RULE_INLINE double binary_rule_score(const BinaryRule *r, double dot, double udot)
{
    double score = dot + r->b;
    if (r->averaged && r->n_seen > 0)
        score = score - (udot + r->ub) / binary_rule_divisor(r, r->n_seen);
    return score;
}

/* Perceptron._learn's scalars for a labelled row of sign y, score (before learning) `score`
 * and squared norm sq: R, whether it is a mistake, the new bias and its accumulator, the
 * steps. 1: learnable; 0: R or a bias would not be finite (Python refuses it). */
RULE_INLINE int binary_rule_learn(const BinaryRule *r, int y, double score, double sq,
                             BinaryStep *s)
{
    double rn = sqrt(sq);
    if (!(rn < INFINITY)) /* rn >= 0, or NaN */
        return 0;
    s->max_norm = rn > r->max_norm ? rn : r->max_norm;
    s->t = r->n_seen + 1;
    s->mistake = (double)y * score <= 0;
    s->b = r->b;
    s->ub = r->ub;
    s->averaging = 0;
    if (!s->mistake)
        return 1;
    const int forgetting = r->half_life > 0.0;
    s->step = r->lr * (double)y; /* lr > 0; an int lr times the sign is exact */
    s->step_int = r->lr_int;
    double db = 0.0;
    int db_int = 0;
    if (r->bias_mode == 0) {
        db = s->step;
        db_int = s->step_int;
    }
    else if (r->bias_mode == 1)
        db = (double)y * s->max_norm * s->max_norm;
    s->averaging = r->averaged && (s->t > 1 || forgetting);
    /* c(t) (_avg_coef): t - 1, an int, or beta ** (avg_ref - t) */
    double c = forgetting ? pow(r->beta, (double)(r->avg_ref - s->t)) : (double)(s->t - 1);
    s->b = r->b + db;
    if (s->averaging)
        s->ub = r->ub + rule_mul(c, !forgetting, db, db_int);
    s->cstep = rule_mul(c, !forgetting, s->step, s->step_int);
    s->cstep_int = !forgetting && s->step_int;
    return -INFINITY < s->b && s->b < INFINITY && -INFINITY < s->ub && s->ub < INFINITY;
}

/* A mistake's cells: w[j] += step * v, and u[j] += cstep * v when averaging, in the row's
 * order, the cells joining the model as they are written. checked: every new value computed
 * into scratch (2n doubles) first, nothing stored unless all are finite; else stored as they
 * are computed (the caller drops the cells when this says one is not finite). 1: done; 0: a
 * value not finite. */
RULE_INLINE int rule_update(RuleCells *c, const RuleRow *row, const BinaryStep *s,
                              int checked, double *scratch)
{
    const Py_ssize_t n = row->n, st = c->stride;
    double check = 0.0;
    for (int pass = 0; pass < 1 + s->averaging; pass++) {
        double *cells = pass ? c->u : c->w;
        const double step = pass ? s->cstep : s->step;
        const int step_int = pass ? s->cstep_int : s->step_int;
        for (Py_ssize_t k = 0; k < n; k++) {
            double v = rule_value(row, k);
            double next = cells[rule_slot(row, k) * st] + rule_product(step, step_int, row, k, v);
            check += next - next; /* 0.0 when finite, NaN otherwise */
            if (checked)
                scratch[pass * n + k] = next;
            else
                cells[rule_slot(row, k) * st] = next;
        }
    }
    if (check != 0.0)
        return 0;
    for (int pass = 0; pass < 1 + s->averaging; pass++) {
        double *cells = pass ? c->u : c->w;
        const unsigned char bit = pass ? RULE_U : RULE_W;
        Py_ssize_t *joined = pass ? c->joined_u : c->joined_w;
        Py_ssize_t *n_joined = pass ? &c->n_joined_u : &c->n_joined_w;
        if (!pass && c->all_w && !checked)
            continue;
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_ssize_t j = rule_slot(row, k);
            if (checked)
                cells[j * st] = scratch[pass * n + k];
            if (!(c->present[j * st] & bit)) {
                c->present[j * st] |= bit;
                joined[(*n_joined)++] = j;
            }
        }
    }
    return 1;
}

/* The learned row's scalars into the rule (Perceptron._learn's last stores). */
RULE_INLINE void binary_rule_commit(BinaryRule *r, const BinaryStep *s)
{
    r->b = s->b;
    r->ub = s->ub;
    r->n_mistakes += s->mistake;
    r->max_norm = s->max_norm;
    r->n_seen = s->t;
}

/* Perceptron._renormalise_due / _renormalise after learned example t: the factor every
 * accumulator (and ub, here) is multiplied by, avg_ref moved to t; 0.0 when not due. */
RULE_INLINE double binary_rule_renormalise(BinaryRule *r, long long t)
{
    if (!(r->half_life > 0.0 &&
          (double)(t - r->avg_ref) >= RENORMALISE_HALF_LIVES * r->half_life))
        return 0.0;
    double factor = pow(r->beta, (double)(t - r->avg_ref));
    r->ub = r->ub * factor;
    r->avg_ref = t;
    return factor;
}

/* The row's folds: dot (and udot, with_average) over the cells whose weight the model has, sq
 * over every value; 0 when a value is not finite (sq looked at only when it is not finite). */
RULE_INLINE int rule_fold(const RuleCells *c, const RuleRow *row, int with_average,
                            double *dot, double *udot, double *sq)
{
    const Py_ssize_t n = row->n, st = c->stride;
    double d = 0.0, e = 0.0, q = 0.0;
    if (c->all_w && !with_average) {
        for (Py_ssize_t k = 0; k < n; k++) {
            double v = rule_value(row, k);
            d += c->w[rule_slot(row, k) * st] * v;
            q += v * v;
        }
    }
    else if (c->all_w) {
        for (Py_ssize_t k = 0; k < n; k++) {
            double v = rule_value(row, k);
            Py_ssize_t j = rule_slot(row, k) * st;
            d += c->w[j] * v;
            e += c->u[j] * v;
            q += v * v;
        }
    }
    else {
        for (Py_ssize_t k = 0; k < n; k++) {
            double v = rule_value(row, k);
            Py_ssize_t j = rule_slot(row, k) * st;
            if (c->present[j] & RULE_W) {
                d += c->w[j] * v;
                if (with_average)
                    e += c->u[j] * v;
            }
            q += v * v;
        }
    }
    *dot = d;
    *udot = e;
    *sq = q;
    if (!(q < INFINITY)) { /* a value not finite, or squares overflowing (refused later) */
        double nonfinite = 0.0;
        for (Py_ssize_t k = 0; k < n; k++) {
            double v = rule_value(row, k);
            nonfinite += v - v;
        }
        return nonfinite == 0.0;
    }
    return 1;
}

/* What binary_rule_row did. */
#define ROW_DONE 0
#define ROW_REFUSED 1   /* learning it would make the model non-finite: the cells dropped */
#define ROW_NONFINITE 2 /* a value not finite */

/* A block's row (y: its sign, 0 unlabelled): predicted as predict_one would (*pred), then
 * learned as Perceptron._learn (unchecked: the caller drops the cells of a refused row);
 * *factor: a renormalisation's factor (0.0: none), u already rescaled over slots 0..m-1. */
RULE_INLINE int binary_rule_row(BinaryRule *r, RuleCells *c, const RuleRow *row, int y,
                           Py_ssize_t m, int8_t *pred, double *factor)
{
    double dot, udot, sq;
    *factor = 0.0;
    if (!rule_fold(c, row, r->averaged && r->n_seen > 0, &dot, &udot, &sq))
        return ROW_NONFINITE;
    *pred = binary_rule_score(r, dot, udot) > 0 ? 1 : -1;
    if (y == 0)
        return ROW_DONE;
    BinaryStep s;
    if (!binary_rule_learn(r, y, dot + r->b, sq, &s))
        return ROW_REFUSED;
    if (s.mistake && !rule_update(c, row, &s, 0, NULL))
        return ROW_REFUSED;
    binary_rule_commit(r, &s);
    double f = binary_rule_renormalise(r, s.t);
    if (f != 0.0) {
        for (Py_ssize_t j = 0; j < m; j++)
            c->u[j * c->stride] = c->u[j * c->stride] * f;
        *factor = f;
    }
    return ROW_DONE;
}

/* -- the passive-aggressive learner -------------------------------------------------------- */

/* PassiveAggressive's hyperparameters and scalars (learners/passive_aggressive.py). */
typedef struct {
    int variant; /* 0 "pa", 1 "pa1", 2 "pa2" */
    double C;
    int learned_bias;
    double b, max_norm;
    long long n_seen, n_mistakes;
} PaRule;

/* step_size(variant, C, loss, sq): PA loss / sq, PA-I min(C, loss / sq), 0 when sq is not
 * > 0; PA-II loss / (sq + 0.5 / C). */
RULE_INLINE double pa_rule_step(int variant, double C, double loss, double sq)
{
    if (variant == 2)
        return loss / (sq + 0.5 / C);
    if (!(sq > 0))
        return 0.0;
    double tau = loss / sq;
    return variant == 1 && C < tau ? C : tau;
}

/* A block's row (y: its sign, 0 unlabelled): predicted as predict_one would (*pred), then
 * learned as PassiveAggressive._learn: loss = 1 - y * score; when loss > 0 (NaN: not), w +=
 * tau * y * x over the row, b too with the learned bias (unchecked: the caller drops the cells
 * of a refused row). */
RULE_INLINE int pa_rule_row(PaRule *r, RuleCells *c, const RuleRow *row, int y, int8_t *pred)
{
    double dot, udot, sq;
    if (!rule_fold(c, row, 0, &dot, &udot, &sq))
        return ROW_NONFINITE;
    double score = dot + r->b;
    *pred = score > 0 ? 1 : -1;
    if (y == 0)
        return ROW_DONE;
    if (!(sq < INFINITY)) /* _sq_dot: too large (R) */
        return ROW_REFUSED;
    double rn = sqrt(sq);
    double loss = 1.0 - (double)y * score;
    if (loss > 0) {
        BinaryStep s = {0};
        s.step = pa_rule_step(r->variant, r->C, loss, sq) * (double)y;
        double b = r->learned_bias ? r->b + s.step : r->b;
        if (b - b != 0.0 || !rule_update(c, row, &s, 0, NULL))
            return ROW_REFUSED;
        r->b = b;
        r->n_mistakes += 1;
    }
    if (rn > r->max_norm)
        r->max_norm = rn;
    r->n_seen += 1;
    return ROW_DONE;
}

/* -- the multi-class passive-aggressive learner -------------------------------------------- */

/* MulticlassPassiveAggressive's hyperparameters and scalars; classes [0, n_active) exist. */
typedef struct {
    int variant;
    double C;
    int learned_bias;
    double max_norm;
    long long n_seen, n_mistakes;
    Py_ssize_t n_active;
} PaMultiRule;

/* A block's row of class y (-1: unlabelled; n_active: a class seen for the first time), over
 * each class c's cells cls[c] (a weight the class's dict lacks is 0.0: adding 0.0 * v changes
 * no left fold from +0.0) and biases b: scores s_c = dot_c + b_c in class order, *pred the
 * first best class (-1: none yet); then MulticlassPassiveAggressive._learn: the rival, the
 * first best class other than y; loss = 1 - (s_y - s_r) (s_y 0.0 for a new class); when
 * loss > 0 (NaN: not) w_y += tau x and w_r += -tau x (tau by the variant, with 2 sq), the
 * biases by +-tau when learned (unchecked: the caller drops the cells of a refused row).
 * check_finite: a row with a value not finite is ROW_NONFINITE (else a labelled one is
 * refused: its sq is not finite). */
RULE_INLINE int pa_multi_rule_row(PaMultiRule *r, RuleCells *cls, double *b, double *scores,
                                  const RuleRow *row, int64_t y, int check_finite,
                                  int64_t *pred)
{
    const Py_ssize_t n = row->n;
    double sq = 0.0;
    for (Py_ssize_t k = 0; k < n; k++) {
        double v = rule_value(row, k);
        sq += v * v;
    }
    if (check_finite && !(sq < INFINITY)) {
        double nonfinite = 0.0;
        for (Py_ssize_t k = 0; k < n; k++) {
            double v = rule_value(row, k);
            nonfinite += v - v;
        }
        if (nonfinite != 0.0)
            return ROW_NONFINITE;
    }
    int64_t best = -1;
    double best_score = 0.0;
    for (Py_ssize_t c = 0; c < r->n_active; c++) {
        const double *w = cls[c].w;
        double dot = 0.0;
        for (Py_ssize_t k = 0; k < n; k++)
            dot += w[rule_slot(row, k)] * rule_value(row, k);
        double sc = dot + b[c];
        scores[c] = sc;
        if (best < 0 || sc > best_score) {
            best = c;
            best_score = sc;
        }
    }
    *pred = best;
    if (y < 0)
        return ROW_DONE;
    if (!(sq < INFINITY)) /* sq_norm_of: too large (R) */
        return ROW_REFUSED;
    double rn = sqrt(sq);
    int64_t rival = -1;
    double rival_score = 0.0;
    for (Py_ssize_t c = 0; c < r->n_active; c++) {
        if (c != y && (rival < 0 || scores[c] > rival_score)) {
            rival = c;
            rival_score = scores[c];
        }
    }
    if (rival >= 0) {
        double loss = 1.0 - ((y < r->n_active ? scores[y] : 0.0) - rival_score);
        if (loss > 0) {
            double tau = pa_rule_step(r->variant, r->C, loss, 2.0 * sq);
            double by = y < r->n_active ? b[y] : 0.0, br = b[rival];
            if (r->learned_bias) {
                by = by + tau;
                br = br - tau;
            }
            BinaryStep sy = {0}, sr = {0};
            sy.step = tau;
            sr.step = -tau;
            int ok = rule_update(&cls[y], row, &sy, 0, NULL);
            ok = rule_update(&cls[rival], row, &sr, 0, NULL) && ok;
            if (!ok || (by - by) + (br - br) != 0.0)
                return ROW_REFUSED;
            b[y] = by;
            b[rival] = br;
            r->n_mistakes += 1;
        }
    }
    if (rn > r->max_norm)
        r->max_norm = rn;
    r->n_seen += 1;
    if (y >= r->n_active)
        r->n_active = y + 1;
    return ROW_DONE;
}

#endif
