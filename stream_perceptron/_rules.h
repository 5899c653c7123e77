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
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
    int paired; /* u == w + 1, stride 2: a class's two folds the lanes of one SSE2 vector */
    int all_u;  /* every slot has its accumulator (after a dense row's averaging update) */
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

/* -a, an exact int when a_int: Python's negation (an int zero stays +0.0). */
RULE_INLINE double rule_neg(double a, int a_int)
{
    return a_int && a == 0.0 ? 0.0 : -a;
}

/* The row's squared norm, sq += v * v from +0.0 in its order, into *sq; with check_finite, 0
 * when a value is not finite (an infinite sq of finite values is the rule's: too large). */
RULE_INLINE int rule_sq(const RuleRow *row, int check_finite, double *sq)
{
    double q = 0.0;
    for (Py_ssize_t k = 0; k < row->n; k++) {
        double v = rule_value(row, k);
        q += v * v;
    }
    *sq = q;
    if (check_finite && !(q < INFINITY)) {
        double nonfinite = 0.0;
        for (Py_ssize_t k = 0; k < row->n; k++) {
            double v = rule_value(row, k);
            nonfinite += v - v;
        }
        return nonfinite == 0.0;
    }
    return 1;
}

/* The first best of n scores (_argmax: the first wins ties, NaN never beats a score); -1 when
 * n is 0. No branch on the scores (a branch there, taken at random classes, is often
 * mispredicted). */
RULE_INLINE Py_ssize_t rule_argmax(const double *scores, Py_ssize_t n)
{
    if (n <= 0)
        return -1;
    Py_ssize_t best = 0;
    double best_score = scores[0];
    for (Py_ssize_t c = 1; c < n; c++) {
        double s = scores[c];
        int take = s > best_score;
        best = take ? c : best;
        best_score = take ? s : best_score;
    }
    return best;
}

/* rule_argmax of two score arrays in one pass (two independent chains). */
RULE_INLINE void rule_argmax2(const double *s, const double *t, Py_ssize_t n, Py_ssize_t *best_s,
                              int64_t *best_t)
{
    if (n <= 0) {
        *best_s = -1;
        *best_t = -1;
        return;
    }
    Py_ssize_t a = 0, b = 0;
    double as = s[0], bs = t[0];
    for (Py_ssize_t c = 1; c < n; c++) {
        int take = s[c] > as, take_t = t[c] > bs;
        a = take ? c : a;
        as = take ? s[c] : as;
        b = take_t ? c : b;
        bs = take_t ? t[c] : bs;
    }
    *best_s = a;
    *best_t = b;
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
RULE_INLINE double rule_divisor(double half_life, double beta, long long avg_ref, long long t)
{
    return half_life > 0.0 ? pow(beta, (double)(avg_ref - t - 1)) : (double)t;
}

RULE_INLINE double binary_rule_divisor(const BinaryRule *r, long long t)
{
    return rule_divisor(r->half_life, r->beta, r->avg_ref, t);
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

/* A mistake's new cells: w[j] + step * v, and u[j] + cstep * v when averaging, in the row's
 * order, into scratch (2n doubles: the weights', then the accumulators') when checked, else
 * stored as they are computed. 1: every value finite; 0: not (unchecked: some stored). */
RULE_INLINE int rule_next(RuleCells *c, const RuleRow *row, const BinaryStep *s, int checked,
                          double *scratch)
{
    const Py_ssize_t n = row->n, st = c->stride;
    double *const w = c->w, *const u = c->u;
    double check = 0.0;
#if defined(__SSE2__)
    if (c->paired && s->averaging && !checked && row->is_int == NULL) {
        /* (w, u) += (step, cstep) * v as one vector: each lane the scalar operations */
        const __m128d steps = _mm_set_pd(s->cstep, s->step);
        __m128d checks = _mm_setzero_pd();
        for (Py_ssize_t k = 0; k < n; k++) {
            double *cell = w + 2 * rule_slot(row, k);
            const __m128d next = _mm_add_pd(_mm_loadu_pd(cell),
                                            _mm_mul_pd(steps, _mm_set1_pd(rule_value(row, k))));
            _mm_storeu_pd(cell, next);
            checks = _mm_add_pd(checks, _mm_sub_pd(next, next));
        }
        return _mm_cvtsd_f64(checks) + _mm_cvtsd_f64(_mm_unpackhi_pd(checks, checks)) == 0.0;
    }
#endif
    for (Py_ssize_t k = 0; k < n; k++) {
        const double v = rule_value(row, k);
        const Py_ssize_t j = rule_slot(row, k) * st;
        const double next = w[j] + rule_product(s->step, s->step_int, row, k, v);
        check += next - next; /* 0.0 when finite, NaN otherwise */
        if (checked)
            scratch[k] = next;
        else
            w[j] = next;
        if (s->averaging) {
            const double unext = u[j] + rule_product(s->cstep, s->cstep_int, row, k, v);
            check += unext - unext;
            if (checked)
                scratch[n + k] = unext;
            else
                u[j] = unext;
        }
    }
    return check == 0.0;
}

/* rule_next's values stored (checked: from scratch), the cells joining the model as they are
 * written (their slots appended to joined_w, joined_u). */
RULE_INLINE void rule_join(RuleCells *c, const RuleRow *row, const BinaryStep *s, int checked,
                           const double *scratch)
{
    const Py_ssize_t n = row->n, st = c->stride;
    const int weights = checked || !c->all_w, accumulators = s->averaging && !c->all_u;
    if (!checked && !weights && !accumulators)
        return;
    for (Py_ssize_t k = 0; k < n; k++) {
        const Py_ssize_t j = rule_slot(row, k);
        unsigned char *p = &c->present[j * st];
        if (checked) {
            c->w[j * st] = scratch[k];
            if (s->averaging)
                c->u[j * st] = scratch[n + k];
        }
        if (weights && !(*p & RULE_W)) {
            *p |= RULE_W;
            c->joined_w[c->n_joined_w++] = j;
        }
        if (accumulators && !(*p & RULE_U)) {
            *p |= RULE_U;
            c->joined_u[c->n_joined_u++] = j;
        }
    }
    if (row->slots32 == NULL && row->slots == NULL && !checked) {
        /* a dense row reaches every slot of its block: all of them have their cells now */
        c->all_w = 1;
        c->all_u = c->all_u || s->averaging;
    }
}

/* A mistake's cells: w[j] += step * v, and u[j] += cstep * v when averaging, in the row's
 * order, the cells joining the model as they are written. checked: every new value computed
 * into scratch (2n doubles) first, nothing stored unless all are finite; else stored as they
 * are computed (the caller drops the cells when this says one is not finite). 1: done; 0: a
 * value not finite. */
RULE_INLINE int rule_update(RuleCells *c, const RuleRow *row, const BinaryStep *s,
                              int checked, double *scratch)
{
    if (!rule_next(c, row, s, checked, scratch))
        return 0;
    rule_join(c, row, s, checked, scratch);
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

/* _renormalise_due / _renormalise after learned example t (LinearHyperparameters): the factor
 * every accumulator is multiplied by, avg_ref moved to t; 0.0 when not due. The binary rule
 * rescales its ub too. */
RULE_INLINE double rule_renormalise(double half_life, double beta, long long *avg_ref,
                                    long long t)
{
    if (!(half_life > 0.0 && (double)(t - *avg_ref) >= RENORMALISE_HALF_LIVES * half_life))
        return 0.0;
    double factor = pow(beta, (double)(t - *avg_ref));
    *avg_ref = t;
    return factor;
}

RULE_INLINE double binary_rule_renormalise(BinaryRule *r, long long t)
{
    double factor = rule_renormalise(r->half_life, r->beta, &r->avg_ref, t);
    if (factor != 0.0)
        r->ub = r->ub * factor;
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
    double sq;
    if (!rule_sq(row, check_finite, &sq))
        return ROW_NONFINITE;
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

/* -- the multi-class perceptron ------------------------------------------------------------ */

/* MulticlassPerceptron's hyperparameters and scalars (learners/multiclass.py); classes
 * [0, n_active) exist. */
typedef struct {
    double lr;
    int lr_int;    /* lr is a Python int (of at most 2**53) */
    int bias_mode; /* 0 "learned", 1 "r2", 2 "none" */
    int averaged;
    double half_life; /* > 0: the forgetting average, beta its factor; 0: the plain average */
    double beta;
    double max_norm;
    long long n_seen, n_mistakes, avg_ref;
    Py_ssize_t n_active;
} MultiRule;

/* What learning a labelled row decided, before anything is stored: the steps of the true
 * class's cells (sy: lr, c(t) lr) and of the predicted class's (sh: -lr, c(t) (-lr)), and
 * their new biases. */
typedef struct {
    long long t;
    int mistake;
    double max_norm;
    BinaryStep sy, sh;
    double by, uby, bh, ubh;
} MultiStep;

/* MulticlassPerceptron._update's numbers for a mistake: the true class's biases by, uby (0.0
 * for a class seen for the first time) and, has_h, the predicted class's bh, ubh move by the
 * bias step db, and by c db when averaging (c: c(t)); the steps of their cells. lr, db and c
 * are exact ints when their flags say so. 1: the biases finite; 0: not (Python refuses). */
RULE_INLINE int multi_rule_step(double lr, int lr_int, double db, int db_int, int averaging,
                                double c, int c_int, double by, double uby, int has_h,
                                double bh, double ubh, MultiStep *s)
{
    const double neg_db = rule_neg(db, db_int), neg_lr = rule_neg(lr, lr_int);
    s->by = by + db;
    s->uby = averaging ? uby + rule_mul(c, c_int, db, db_int) : uby;
    s->bh = has_h ? bh + neg_db : 0.0;
    s->ubh = has_h && averaging ? ubh + rule_mul(c, c_int, neg_db, db_int) : has_h ? ubh : 0.0;
    BinaryStep sy = {0}, sh = {0};
    sy.averaging = sh.averaging = averaging;
    sy.step = lr;
    sh.step = neg_lr;
    sy.step_int = sh.step_int = lr_int;
    if (averaging) {
        sy.cstep = rule_mul(c, c_int, lr, lr_int);
        sh.cstep = rule_mul(c, c_int, neg_lr, lr_int);
        sy.cstep_int = sh.cstep_int = c_int && lr_int;
    }
    s->sy = sy;
    s->sh = sh;
    return -INFINITY < s->by && s->by < INFINITY && -INFINITY < s->uby && s->uby < INFINITY &&
           -INFINITY < s->bh && s->bh < INFINITY && -INFINITY < s->ubh && s->ubh < INFINITY;
}

/* MulticlassPerceptron._learn's decision for a labelled row of class y (n_active: a class seen
 * for the first time) whose plain argmax is h (-1: none), sq its squared norm, b and ub the
 * classes' biases: R, whether it is a mistake (always, for a new class), the bias step
 * (_bias_step), c(t) and the numbers of the update (multi_rule_step). 1: learnable; 0: R or a
 * bias would not be finite (Python refuses it). */
RULE_INLINE int multi_rule_learn(const MultiRule *r, Py_ssize_t y, Py_ssize_t h, double sq,
                                 const double *b, const double *ub, MultiStep *s)
{
    double rn = sqrt(sq);
    if (!(rn < INFINITY)) /* rn >= 0, or NaN */
        return 0;
    s->max_norm = rn > r->max_norm ? rn : r->max_norm;
    s->t = r->n_seen + 1;
    s->mistake = !(y == h && y < r->n_active);
    if (!s->mistake)
        return 1;
    const int forgetting = r->half_life > 0.0;
    double db = r->bias_mode == 0 ? r->lr : r->bias_mode == 1 ? s->max_norm * s->max_norm : 0.0;
    int db_int = r->bias_mode == 0 && r->lr_int;
    int averaging = r->averaged && (s->t > 1 || forgetting);
    /* c(t) (_avg_coef): t - 1, an int, or beta ** (avg_ref - t) */
    double c = forgetting ? pow(r->beta, (double)(r->avg_ref - s->t)) : (double)(s->t - 1);
    int known = y < r->n_active;
    return multi_rule_step(r->lr, r->lr_int, db, db_int, averaging, c, !forgetting,
                           known ? b[y] : 0.0, known ? ub[y] : 0.0, h >= 0,
                           h >= 0 ? b[h] : 0.0, h >= 0 ? ub[h] : 0.0, s);
}

/* A mistake's cells: class y's (cy) by the step sy, the predicted class's (ch; NULL: none) by
 * sh, as rule_next (checked: into scratch, 4n doubles). 1: every value finite. */
RULE_INLINE int multi_rule_next(RuleCells *cy, RuleCells *ch, const RuleRow *row,
                                const MultiStep *s, int checked, double *scratch)
{
    int ok = rule_next(cy, row, &s->sy, checked, scratch);
    if (ch != NULL)
        ok = rule_next(ch, row, &s->sh, checked, checked ? scratch + 2 * row->n : NULL) && ok;
    return ok;
}

/* multi_rule_next's values stored, as rule_join. */
RULE_INLINE void multi_rule_join(RuleCells *cy, RuleCells *ch, const RuleRow *row,
                                 const MultiStep *s, int checked, const double *scratch)
{
    rule_join(cy, row, &s->sy, checked, scratch);
    if (ch != NULL)
        rule_join(ch, row, &s->sh, checked, checked ? scratch + 2 * row->n : NULL);
}

/* A mistake's biases into b, ub (classes y and h, -1: none); the learned row's scalars into the
 * rule too (multi_rule_commit): _learn's and _update's last stores. */
RULE_INLINE void multi_rule_biases(const MultiStep *s, Py_ssize_t y, Py_ssize_t h, double *b,
                                   double *ub)
{
    b[y] = s->by;
    ub[y] = s->uby;
    if (h >= 0) {
        b[h] = s->bh;
        ub[h] = s->ubh;
    }
}

RULE_INLINE void multi_rule_commit(MultiRule *r, const MultiStep *s, Py_ssize_t y,
                                   Py_ssize_t h, double *b, double *ub)
{
    if (s->mistake) {
        multi_rule_biases(s, y, h, b, ub);
        r->n_mistakes += 1;
        if (y >= r->n_active)
            r->n_active = y + 1;
    }
    r->max_norm = s->max_norm;
    r->n_seen = s->t;
}

/* Class c's plain score dot + b[c] into scores[c] and, with_average, its averaged score
 * (dot + b[c]) - (udot + ub[c]) / d into ascores[c] (predict_one's scores). */
RULE_INLINE void multi_rule_score(Py_ssize_t c, double dot, double udot, const int with_average,
                                  const double *b, const double *ub, double d, double *scores,
                                  double *ascores)
{
    const double s = dot + b[c];
    scores[c] = s;
    if (with_average)
        ascores[c] = s - (udot + ub[c]) / d;
}

/* k (a constant: 1 to 4) classes' folds from class c on, their cells' stride st: dot (and
 * udot, with_average a constant) each a left fold from +0.0 over the row in its order (a cell
 * a class lacks holds +0.0: adding 0.0 * v, v finite, changes no such fold). */
RULE_INLINE void multi_rule_fold_k(const RuleCells *cls, Py_ssize_t c, const int k,
                                   const int with_average, const RuleRow *row, const double *b,
                                   const double *ub, double d, double *dot, double *udot)
{
    const Py_ssize_t st = cls[c].stride;
    /* named pointers and sums (k a constant: the unused ones dropped), each in a register */
    const double *w0 = cls[c].w, *w1 = k > 1 ? cls[c + 1].w : w0;
    const double *w2 = k > 2 ? cls[c + 2].w : w0, *w3 = k > 3 ? cls[c + 3].w : w0;
    const double *u0 = cls[c].u, *u1 = k > 1 ? cls[c + 1].u : u0;
    const double *u2 = k > 2 ? cls[c + 2].u : u0, *u3 = k > 3 ? cls[c + 3].u : u0;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, e0 = 0.0, e1 = 0.0, e2 = 0.0, e3 = 0.0;
    for (Py_ssize_t i = 0; i < row->n; i++) {
        const double v = rule_value(row, i);
        const Py_ssize_t j = rule_slot(row, i) * st;
        a0 += w0[j] * v;
        if (k > 1)
            a1 += w1[j] * v;
        if (k > 2)
            a2 += w2[j] * v;
        if (k > 3)
            a3 += w3[j] * v;
        if (with_average) {
            e0 += u0[j] * v;
            if (k > 1)
                e1 += u1[j] * v;
            if (k > 2)
                e2 += u2[j] * v;
            if (k > 3)
                e3 += u3[j] * v;
        }
    }
    const double a[4] = {a0, a1, a2, a3}, e[4] = {e0, e1, e2, e3};
    for (int q = 0; q < k; q++)
        multi_rule_score(c + q, a[q], e[q], with_average, b, ub, d, dot, udot);
}

#if defined(__SSE2__)
/* multi_rule_fold_k of paired cells (RuleCells.paired), averaged: a class's (dot, udot) the
 * two lanes of one vector, each lane its own left fold from +0.0 in the row's order (one
 * load, one multiply and one add carry a term of both). */
RULE_INLINE void multi_rule_fold_pairs_k(const RuleCells *cls, Py_ssize_t c, const int k,
                                         const RuleRow *row, const double *b,
                                         const double *ub, double d, double *dot,
                                         double *udot)
{
    /* named pointers and sums (k a constant: the unused ones dropped), each in a register */
    const double *w0 = cls[c].w, *w1 = k > 1 ? cls[c + 1].w : w0;
    const double *w2 = k > 2 ? cls[c + 2].w : w0, *w3 = k > 3 ? cls[c + 3].w : w0;
    __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (Py_ssize_t i = 0; i < row->n; i++) {
        const __m128d v = _mm_set1_pd(rule_value(row, i));
        const Py_ssize_t j = 2 * rule_slot(row, i);
        a0 = _mm_add_pd(a0, _mm_mul_pd(_mm_loadu_pd(w0 + j), v));
        if (k > 1)
            a1 = _mm_add_pd(a1, _mm_mul_pd(_mm_loadu_pd(w1 + j), v));
        if (k > 2)
            a2 = _mm_add_pd(a2, _mm_mul_pd(_mm_loadu_pd(w2 + j), v));
        if (k > 3)
            a3 = _mm_add_pd(a3, _mm_mul_pd(_mm_loadu_pd(w3 + j), v));
    }
    const __m128d a[4] = {a0, a1, a2, a3};
    for (int q = 0; q < k; q++)
        multi_rule_score(c + q, _mm_cvtsd_f64(a[q]), _mm_cvtsd_f64(_mm_unpackhi_pd(a[q], a[q])),
                         1, b, ub, d, dot, udot);
}
#endif

/* Every class's scores (multi_rule_score; d: D(n_seen) when with_average), the folds several
 * classes at a time (independent folds in flight, each class's scores made after its folds,
 * while the next classes' folds run). */
RULE_INLINE void multi_rule_scores(const RuleCells *cls, Py_ssize_t nc, const RuleRow *row,
                                   const int with_average, const double *b, const double *ub,
                                   double d, double *scores, double *ascores)
{
    Py_ssize_t c = 0;
#if defined(__SSE2__)
    if (with_average && nc > 0 && cls[0].paired) {
        for (; c + 4 <= nc; c += 4)
            multi_rule_fold_pairs_k(cls, c, 4, row, b, ub, d, scores, ascores);
        for (; c + 2 <= nc; c += 2)
            multi_rule_fold_pairs_k(cls, c, 2, row, b, ub, d, scores, ascores);
        for (; c < nc; c++)
            multi_rule_fold_pairs_k(cls, c, 1, row, b, ub, d, scores, ascores);
        return;
    }
#endif
    if (with_average)
        for (; c + 2 <= nc; c += 2)
            multi_rule_fold_k(cls, c, 2, 1, row, b, ub, d, scores, ascores);
    else
        for (; c + 4 <= nc; c += 4)
            multi_rule_fold_k(cls, c, 4, 0, row, b, ub, d, scores, ascores);
    for (; c < nc; c++)
        multi_rule_fold_k(cls, c, 1, with_average, row, b, ub, d, scores, ascores);
}

/* A block's row of class y (-1: unlabelled; n_active: a class seen for the first time) over
 * each class c's cells cls[c] (one stride for all) and biases b, ub: predicted as predict_one
 * would (*pred, -1: no class yet; the argmax of the averaged scores s - (udot + ub) / D(t)
 * once averaged and learned), then learned as MulticlassPerceptron._learn (unchecked: the
 * caller drops the cells of a refused row). dot, udot: scratch of a score a class. *factor: a
 * renormalisation's factor (0.0: none), the accumulators of slots 0..m-1 of every class and
 * ub already rescaled. check_finite: a row with a value not finite is ROW_NONFINITE. */
RULE_INLINE int multi_rule_row(MultiRule *r, RuleCells *cls, double *b, double *ub,
                               double *dot, double *udot, const RuleRow *row, int64_t y,
                               int check_finite, Py_ssize_t m, int64_t *pred, double *factor)
{
    double sq = 0.0;
    *factor = 0.0;
    if ((check_finite || y >= 0) && !rule_sq(row, check_finite, &sq))
        return ROW_NONFINITE;
    const Py_ssize_t nc = r->n_active;
    Py_ssize_t h;
    if (r->averaged && r->n_seen > 0) {
        const double d = rule_divisor(r->half_life, r->beta, r->avg_ref, r->n_seen);
        multi_rule_scores(cls, nc, row, 1, b, ub, d, dot, udot);
        rule_argmax2(dot, udot, nc, &h, pred);
    }
    else {
        multi_rule_scores(cls, nc, row, 0, b, ub, 1.0, dot, udot);
        *pred = h = rule_argmax(dot, nc);
    }
    if (y < 0)
        return ROW_DONE;
    MultiStep s;
    if (!multi_rule_learn(r, y, h, sq, b, ub, &s))
        return ROW_REFUSED;
    if (s.mistake) {
        RuleCells *ch = h >= 0 ? &cls[h] : NULL;
        if (!multi_rule_next(&cls[y], ch, row, &s, 0, NULL))
            return ROW_REFUSED;
        multi_rule_join(&cls[y], ch, row, &s, 0, NULL);
    }
    multi_rule_commit(r, &s, y, h, b, ub);
    double f = rule_renormalise(r->half_life, r->beta, &r->avg_ref, s.t);
    if (f != 0.0) {
        for (Py_ssize_t c = 0; c < r->n_active; c++) {
            double *u = cls[c].u;
            const Py_ssize_t st = cls[c].stride;
            for (Py_ssize_t j = 0; j < m; j++)
                u[j * st] = u[j * st] * f;
            ub[c] = ub[c] * f;
        }
        *factor = f;
    }
    return ROW_DONE;
}

#endif
