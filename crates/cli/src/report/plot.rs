//! The cactus plot: for each results file, its solved instances sorted by
//! time, the k-th at (k, its seconds), on a log time axis. Drawn with
//! plotters as SVG; PNG is that SVG rendered by resvg (text in the
//! system's fonts).

use super::Series;
use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (900, 560);

/// The plot as an SVG document.
pub fn cactus_svg(series: &[Series]) -> Result<String> {
    let times: Vec<Vec<f64>> =
        series.iter().map(|s| s.solved_times().into_iter().map(|t| t.max(1e-3)).collect()).collect();
    let most = times.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let all = times.iter().flatten().copied();
    let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(l, h), t| (l.min(t), h.max(t)));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Instances solved against time", ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(0..most + 1, (lo / 1.5..hi * 1.5).log_scale())
            .map_err(|e| anyhow!("plot: {e}"))?;
        chart
            .configure_mesh()
            .x_desc("instances solved")
            .y_desc("seconds per instance")
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        for (k, (s, t)) in series.iter().zip(&times).enumerate() {
            let colour = Palette99::pick(k).to_rgba().stroke_width(2);
            let points: Vec<(usize, f64)> = t.iter().enumerate().map(|(i, &v)| (i + 1, v)).collect();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), colour))
                .map_err(|e| anyhow!("plot: {e}"))?
                .label(format!("{} ({})", s.name, t.len()))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
        root.present().map_err(|e| anyhow!("plot: {e}"))?;
    }
    Ok(svg)
}

/// Renders `svg` to a PNG file.
pub fn svg_to_png(svg: &str, path: &Path) -> Result<()> {
    let mut opt = resvg::usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    // fontdb names Arial for "sans-serif"; use a sans face that is there.
    let family = |f: &resvg::usvg::fontdb::FaceInfo| f.families.first().map(|(name, _)| name.clone());
    let sans = db.faces().filter_map(family).find(|n| n.contains("Sans") && !n.contains("Mono"));
    if let Some(name) = sans.or_else(|| db.faces().find_map(family)) {
        db.set_sans_serif_family(name);
    }
    let tree = resvg::usvg::Tree::from_str(svg, &opt).context("plot: the SVG does not parse")?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).context("plot: empty image")?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.save_png(path).with_context(|| format!("{}: cannot write", path.display()))
}
