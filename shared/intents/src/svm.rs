//! One-vs-rest linear SVMs (L2-regularised, squared hinge loss) trained by dual coordinate
//! descent, the method of LIBLINEAR (Hsieh et al., ICML 2008), with a bias feature of 1.

use crate::features::Sparse;

/// Training settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SvmSpec {
    /// Regularisation: larger fits the examples more closely.
    pub c: f32,
    /// Most passes over the examples per class.
    pub max_epochs: u32,
    /// A pass whose largest projected gradient is below this ends the training of a class.
    pub tolerance: f32,
}

impl Default for SvmSpec {
    fn default() -> Self {
        SvmSpec { c: 1.0, max_epochs: 40, tolerance: 0.05 }
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
/// weighs `weights[i]` (its share of `C`).
fn binary(
    xs: &[Sparse],
    norms: &[f32],
    weights: &[f32],
    positive: &dyn Fn(usize) -> bool,
    dim: usize,
    spec: &SvmSpec,
    seed: u64,
) -> (Vec<f32>, f32) {
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
                    for (&j, &v) in xs[i].index.iter().zip(&xs[i].value) {
                        w[j as usize] += step * v;
                    }
                    b += step;
                }
            }
        }
        if worst < spec.tolerance {
            break;
        }
    }
    (w, b)
}

/// Train one SVM per class on `xs` (features) and `labels` (class ids below `classes`), each
/// example weighing `weights[i]`; `threads` classes are trained at once.
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
                            let (w, b) =
                                binary(xs, norms, weights, &positive, dim, spec, 0x9e37_79b9_7f4a_7c15 ^ c as u64);
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
