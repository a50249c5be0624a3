//! One-vs-rest linear models, L2-regularised, with a bias feature of 1, trained by dual
//! coordinate descent, the methods of LIBLINEAR: the squared hinge loss of a linear SVM
//! (Hsieh et al., ICML 2008) or the logistic loss (Yu, Huang and Lin, Machine Learning 2011).

use crate::features::Sparse;

/// What each binary model minimises besides its weights' length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loss {
    /// `max(0, 1 − y·s)²`: a linear SVM; scores are margins.
    SquaredHinge,
    /// `ln(1 + e^(−y·s))`: logistic regression; scores are log-odds.
    Logistic,
}

/// Training settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvmSpec {
    /// The loss.
    pub loss: Loss,
    /// Regularisation: larger fits the examples more closely.
    pub c: f32,
    /// Most passes over the examples per class.
    pub max_epochs: u32,
    /// A pass whose largest projected gradient is below this ends the training of a class.
    pub tolerance: f32,
}

impl SvmSpec {
    /// The linear SVM both routers start from: squared hinge, `C` = 1, at most 40 passes.
    pub const DEFAULT: SvmSpec = SvmSpec { loss: Loss::SquaredHinge, c: 1.0, max_epochs: 40, tolerance: 0.05 };
}

impl Default for SvmSpec {
    fn default() -> Self {
        SvmSpec::DEFAULT
    }
}

/// The weights of every class, kept only for the buckets some example uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    /// Classes.
    pub classes: usize,
    /// Used bucket ids, ascending.
    pub rows: Vec<u32>,
    /// `rows.len() × classes`, bucket-major.
    pub matrix: Vec<f32>,
    /// One bias per class.
    pub bias: Vec<f32>,
}

/// A small deterministic generator for the visiting order (xorshift64*).
struct Order(u64);

impl Order {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn shuffle(&mut self, items: &mut [usize]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// One binary problem: `positive(i)` says whether example `i` is of the class; example `i`
/// weighs `weights[i]` (its share of `C`); `norms[i]` is its squared length.
struct Binary<'a> {
    xs: &'a [Sparse],
    norms: &'a [f32],
    weights: &'a [f32],
    positive: &'a dyn Fn(usize) -> bool,
    dim: usize,
}

/// `w += step·x` and `b += step` (the bias feature is 1).
fn add(w: &mut [f32], b: &mut f32, x: &Sparse, step: f32) {
    for (&j, &v) in x.index.iter().zip(&x.value) {
        w[j as usize] += step * v;
    }
    *b += step;
}

/// One binary SVM (squared hinge) by dual coordinate descent.
fn binary(problem: &Binary, spec: &SvmSpec, seed: u64) -> (Vec<f32>, f32) {
    let Binary { xs, norms, weights, positive, dim } = *problem;
    let n = xs.len();
    let diags: Vec<f32> = weights.iter().map(|w| 1.0 / (2.0 * spec.c * w.max(1e-3))).collect();
    let mut alpha = vec![0f32; n];
    let mut w = vec![0f32; dim];
    let mut b = 0f32;
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = Order(seed | 1);
    for _ in 0..spec.max_epochs {
        rng.shuffle(&mut order);
        let mut worst = 0f32;
        for &i in &order {
            let y = if positive(i) { 1.0 } else { -1.0 };
            let diag = diags[i];
            let g = y * (xs[i].dot(&w) + b) - 1.0 + diag * alpha[i];
            let pg = if alpha[i] == 0.0 { g.min(0.0) } else { g };
            worst = worst.max(pg.abs());
            if pg.abs() > 1e-12 {
                let old = alpha[i];
                alpha[i] = (old - g / (norms[i] + 1.0 + diag)).max(0.0);
                let step = (alpha[i] - old) * y;
                if step != 0.0 {
                    add(&mut w, &mut b, &xs[i], step);
                }
            }
        }
        if worst < spec.tolerance {
            break;
        }
    }
    (w, b)
}

/// One binary logistic regression by dual coordinate descent: each example's pair of dual
/// variables `(α, C·w − α)` moves by a few Newton steps on its one-variable problem, and the
/// weights follow `α·y·x`. `spec.tolerance` bounds the largest gradient of a pass.
fn binary_logistic(problem: &Binary, spec: &SvmSpec, seed: u64) -> (Vec<f32>, f32) {
    let Binary { xs, norms, weights, positive, dim } = *problem;
    let n = xs.len();
    let bounds: Vec<f64> = weights.iter().map(|w| f64::from(spec.c * w.max(1e-3))).collect();
    // α of each example; its partner is `bound − α`. Both start inside (0, bound).
    let mut alpha: Vec<f64> = bounds.iter().map(|&c| (1e-3 * c).min(1e-8)).collect();
    let mut w = vec![0f32; dim];
    let mut b = 0f32;
    let label = |i: usize| if positive(i) { 1.0f64 } else { -1.0 };
    for (i, x) in xs.iter().enumerate() {
        add(&mut w, &mut b, x, (alpha[i] * label(i)) as f32);
    }
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = Order(seed | 1);
    let mut inner_tolerance = 1e-2f64;
    for _ in 0..spec.max_epochs {
        rng.shuffle(&mut order);
        let mut worst = 0f64;
        let mut newton_steps = 0usize;
        for &i in &order {
            let y = label(i);
            let c = bounds[i];
            let a = f64::from(norms[i]) + 1.0;
            let yscore = y * f64::from(xs[i].dot(&w) + b);
            // Solve for whichever of the pair the optimum makes the smaller, so that its
            // logarithm stays accurate (LIBLINEAR's choice).
            let (mut z_old, sign) =
                if 0.5 * a * (c - 2.0 * alpha[i]) + yscore < 0.0 { (c - alpha[i], -1.0) } else { (alpha[i], 1.0) };
            z_old = z_old.clamp(f64::MIN_POSITIVE, c);
            let mut z = if c - z_old < 0.5 * c { 0.1 * z_old } else { z_old };
            let gradient = |z: f64| a * (z - z_old) + sign * yscore + (z / (c - z)).ln();
            let mut g = gradient(z);
            worst = worst.max(g.abs());
            let mut steps = 0;
            while steps <= 100 && g.abs() >= inner_tolerance {
                let curvature = a + c / ((c - z) * z);
                let next = z - g / curvature;
                z = if next <= 0.0 { 0.1 * z } else { next.min(c * (1.0 - 1e-12)) };
                g = gradient(z);
                steps += 1;
            }
            newton_steps += steps;
            if steps > 0 {
                let new_alpha = if sign > 0.0 { z } else { c - z };
                let step = ((new_alpha - alpha[i]) * y) as f32;
                alpha[i] = new_alpha;
                if step != 0.0 {
                    add(&mut w, &mut b, &xs[i], step);
                }
            }
        }
        if newton_steps <= n / 10 {
            inner_tolerance = (0.1 * inner_tolerance).max(1e-8);
        }
        if worst < f64::from(spec.tolerance) {
            break;
        }
    }
    (w, b)
}

/// Train one linear model per class (`spec.loss`) on `xs` (features) and `labels` (class ids
/// below `classes`), each example weighing `weights[i]`; `threads` classes are trained at once.
pub fn train(
    xs: &[Sparse],
    labels: &[usize],
    weights: &[f32],
    classes: usize,
    dim: usize,
    spec: &SvmSpec,
    threads: usize,
) -> Weights {
    let norms: Vec<f32> = xs.iter().map(Sparse::norm2).collect();
    let mut used: Vec<u32> = xs.iter().flat_map(|x| x.index.iter().copied()).collect();
    used.sort_unstable();
    used.dedup();
    let mut matrix = vec![0f32; used.len() * classes];
    let mut bias = vec![0f32; classes];
    let threads = threads.max(1);
    let per_class: Vec<(usize, Vec<f32>, f32)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (xs, labels, norms, weights) = (xs, labels, &norms, weights);
                scope.spawn(move || {
                    (t..classes)
                        .step_by(threads)
                        .map(|c| {
                            let positive = |i: usize| labels[i] == c;
                            let seed = 0x9e37_79b9_7f4a_7c15 ^ c as u64;
                            let problem = Binary { xs, norms, weights, positive: &positive, dim };
                            let (w, b) = match spec.loss {
                                Loss::SquaredHinge => binary(&problem, spec, seed),
                                Loss::Logistic => binary_logistic(&problem, spec, seed),
                            };
                            (c, w, b)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(classes) => classes,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    for (c, w, b) in per_class {
        for (row, &bucket) in used.iter().enumerate() {
            matrix[row * classes + c] = w[bucket as usize];
        }
        bias[c] = b;
    }
    Weights { classes, rows: used, matrix, bias }
}

/// The weights as they are shipped and served: each bucket's row of class weights as `i8`
/// with the row's own scale (a quarter of the bytes of `f32`, read without decoding).
#[derive(Debug, Clone, PartialEq)]
pub struct Compact {
    /// Classes.
    pub classes: usize,
    /// Used bucket ids, ascending.
    pub rows: Vec<u32>,
    /// Per row, the weight an `i8` step stands for.
    pub scale: Vec<f32>,
    /// `rows.len() × classes`, bucket-major.
    pub matrix: Vec<i8>,
    /// One bias per class.
    pub bias: Vec<f32>,
}

impl Weights {
    /// Quantise each row to `i8` against its largest weight.
    pub fn compact(&self) -> Compact {
        let k = self.classes;
        let mut scale = Vec::with_capacity(self.rows.len());
        let mut matrix = Vec::with_capacity(self.matrix.len());
        for row in self.matrix.chunks(k) {
            let max = row.iter().fold(0f32, |m, w| m.max(w.abs()));
            let s = if max > 0.0 { max / 127.0 } else { 1.0 };
            scale.push(s);
            matrix.extend(row.iter().map(|w| (w / s).round().clamp(-127.0, 127.0) as i8));
        }
        Compact { classes: k, rows: self.rows.clone(), scale, matrix, bias: self.bias.clone() }
    }
}

impl Compact {
    /// Every class's score (margin) for `x`.
    pub fn scores(&self, x: &Sparse) -> Vec<f32> {
        let mut out = self.bias.clone();
        let k = self.classes;
        for (&i, &v) in x.index.iter().zip(&x.value) {
            if let Ok(row) = self.rows.binary_search(&i) {
                let s = v * self.scale[row];
                for (o, &w) in out.iter_mut().zip(&self.matrix[row * k..(row + 1) * k]) {
                    *o += s * f32::from(w);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logistic_regression_reaches_the_optimum_of_a_problem_solved_by_hand() {
        // x = +1 is positive, x = −1 negative, C = 1. By symmetry the bias is 0 and both
        // examples have y·s = w, so the optimum of ½(w² + b²) + 2·ln(1 + e^(−w)) solves
        // w = 2·σ(−w): w = 0.6748.
        let xs = [Sparse { index: vec![0], value: vec![1.0] }, Sparse { index: vec![0], value: vec![-1.0] }];
        let spec = SvmSpec { loss: Loss::Logistic, c: 1.0, max_epochs: 2_000, tolerance: 1e-5 };
        let trained = train(&xs, &[0, 1], &[1.0, 1.0], 2, 1, &spec, 1);
        let (w, b) = (trained.matrix[0], trained.bias[0]);
        assert!((w - 0.6748).abs() < 1e-3 && b.abs() < 1e-3, "w {w}, b {b}");
        assert!((w - 2.0 / (1.0 + w.exp())).abs() < 1e-3, "w {w} is not a fixed point");
        // The other class is the mirror image.
        assert!((trained.matrix[1] + w).abs() < 1e-3, "{:?}", trained.matrix);
    }

    #[test]
    fn an_example_weighing_more_pulls_the_logistic_boundary_away_from_it() {
        let xs = [Sparse { index: vec![0], value: vec![1.0] }, Sparse { index: vec![0], value: vec![-1.0] }];
        let spec = SvmSpec { loss: Loss::Logistic, c: 1.0, max_epochs: 2_000, tolerance: 1e-5 };
        let even = train(&xs, &[0, 1], &[1.0, 1.0], 2, 1, &spec, 1);
        let heavy = train(&xs, &[0, 1], &[4.0, 1.0], 2, 1, &spec, 1);
        // Class 0's bias grows when its example weighs more.
        assert!(heavy.bias[0] > even.bias[0] + 0.1, "{} against {}", heavy.bias[0], even.bias[0]);
    }

    #[test]
    fn scores_match_a_plain_sum_over_the_rows_for_features_in_any_order() {
        let compact = Compact {
            classes: 2,
            rows: vec![3, 5, 6, 7, 20],
            scale: vec![1.0, 0.5, 2.0, 1.0, 0.25],
            matrix: vec![1, -1, 2, 2, -3, 1, 4, 0, 8, -8],
            bias: vec![0.5, -0.5],
        };
        let naive = |x: &Sparse| {
            let mut out = compact.bias.clone();
            for (&i, &v) in x.index.iter().zip(&x.value) {
                if let Some(row) = compact.rows.iter().position(|&r| r == i) {
                    for (c, o) in out.iter_mut().enumerate() {
                        *o += v * compact.scale[row] * f32::from(compact.matrix[row * 2 + c]);
                    }
                }
            }
            out
        };
        for index in [
            vec![3, 5, 6, 7, 20],
            vec![1, 5, 6, 9, 20, 21],
            vec![20, 3, 7, 4, 5],
            vec![0, 2, 25],
            vec![5, 5, 6],
            vec![],
        ] {
            let x = Sparse { value: index.iter().map(|&i| 1.0 + i as f32 / 10.0).collect(), index };
            assert_eq!(compact.scores(&x), naive(&x), "{:?}", x.index);
        }
    }
}
