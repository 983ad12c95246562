//! The plots of `cargo xtask bench` (SVG, drawn with plotters).

use anyhow::{Result, anyhow};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use serde_json::Value;

const SIZE: (u32, u32) = (900, 560);

/// Per network, its test-set rows' `(x, y)` by `f`, sorted by x.
fn series(r: &Value, f: impl Fn(&Value) -> Option<(f64, f64)>) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for t in r["testset"].as_array().into_iter().flatten() {
        let name = t["network"].as_str().unwrap_or("").to_string();
        let Some(p) = f(t) else { continue };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(p),
            None => out.push((name, vec![p])),
        }
    }
    for (_, v) in &mut out {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Lines (with points) of `data` on log-log or lin axes, as an SVG.
fn draw(data: &[(String, Vec<(f64, f64)>)], caption: &str, (xd, yd): (&str, &str), log_y: bool) -> Result<String> {
    let all = data.iter().flat_map(|(_, v)| v.iter().copied());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, 0.0f64, f64::INFINITY, 0.0f64);
    for (x, y) in all {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if !x0.is_finite() {
        (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
    }
    let x0 = (x0 / 1.5).max(1e-6);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let mut b = ChartBuilder::on(&root);
        b.caption(caption, ("sans-serif", 22)).margin(16).x_label_area_size(44).y_label_area_size(64);
        let x = (x0..x1 * 1.5).log_scale();
        if log_y {
            let y = ((y0 / 1.5).max(1e-6)..y1 * 1.5).log_scale();
            lines(&mut b, (x, y), data, (xd, yd), SeriesLabelPosition::UpperLeft)?;
        } else {
            lines(&mut b, (x, 0.0..(y1 * 1.1).max(1.0)), data, (xd, yd), SeriesLabelPosition::LowerRight)?;
        }
        root.present().map_err(|e| anyhow!("plot: {e}"))?;
    }
    Ok(svg)
}

/// One line with points per series of `data` on the axes `(x, y)`, and
/// their legend at `at`.
fn lines<X, Y>(
    b: &mut ChartBuilder<'_, '_, SVGBackend<'_>>,
    (x, y): (X, Y),
    data: &[(String, Vec<(f64, f64)>)],
    (xd, yd): (&str, &str),
    at: SeriesLabelPosition,
) -> Result<()>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: &dyn std::fmt::Display| anyhow!("plot: {e}");
    let mut c = b.build_cartesian_2d(x, y).map_err(|x| e(&x))?;
    c.configure_mesh().x_desc(xd).y_desc(yd).draw().map_err(|x| e(&x))?;
    for (k, (n, v)) in data.iter().enumerate() {
        let col = Palette99::pick(k).to_rgba();
        c.draw_series(LineSeries::new(v.iter().copied(), col.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(n.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], col));
        c.draw_series(v.iter().map(|&p| Circle::new(p, 4, col.filled()))).map_err(|x| e(&x))?;
    }
    c.configure_series_labels()
        .position(at)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    Ok(())
}

/// First-pass milliseconds per image against the model's size.
pub fn size_plot(r: &Value) -> Result<String> {
    let s = series(r, |t| Some((t["model_kib"].as_f64()?, t["first_pass_per_image"].as_f64()? * 1e3)));
    // One point per network: the first pass does not depend on the budget.
    let one: Vec<(String, Vec<(f64, f64)>)> =
        s.into_iter().map(|(n, v)| (n, v.into_iter().take(1).collect())).collect();
    draw(&one, "First pass: time per image against model size", ("ONNX model size, KiB", "ms per image"), true)
}

/// Certified share of the images against the run's wall time.
pub fn budget_plot(r: &Value) -> Result<String> {
    let s = series(r, |t| {
        let images = t["images"].as_f64()?.max(1.0);
        Some((t["wall"].as_f64()?, 100.0 * t["verified"].as_f64()? / images))
    });
    draw(&s, "Certified accuracy against time spent (budgets)", ("wall seconds", "% of images verified"), false)
}
