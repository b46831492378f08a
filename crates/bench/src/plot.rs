//! Draws a figure's plots as PNG (plotters, with a font shipped in the binary so that a bare
//! machine needs nothing installed).

use onepipe_sim::figures::Plot;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use std::path::Path;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// Writes `plots` side by side into one PNG at `path`.
pub fn write_png(plots: &[Plot], path: &Path) -> Result<(), String> {
    // Registering twice is harmless; the font is valid, so this only fails on a plotters bug.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the bundled font could not be loaded".to_string())?;
    let width = 720 * plots.len().max(1) as u32;
    let root = BitMapBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let areas = root.split_evenly((1, plots.len().max(1)));
    for (plot, area) in plots.iter().zip(areas) {
        draw(plot, &area).map_err(|e| format!("drawing {}: {e}", path.display()))?;
    }
    root.present()
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn bounds(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        // Linear axes start at zero for positive data, so a flat line looks flat.
        let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.1).max(1e-9);
        (if lo >= 0.0 { 0.0 } else { lo - pad }, hi + pad)
    }
}

fn draw(plot: &Plot, area: &DrawingArea<BitMapBackend, Shift>) -> DrawResult {
    let points = || plot.series.iter().flat_map(|s| s.points.iter().copied());
    let (x0, x1) = bounds(points().map(|p| p.0), plot.x_log);
    let (y0, y1) = bounds(points().map(|p| p.1), plot.y_log);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&plot.title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60);
    // plotters types log and linear axes differently, so each combination is its own chart.
    match (plot.x_log, plot.y_log) {
        (true, true) => lines(
            plot,
            builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?,
        ),
        (true, false) => lines(plot, builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
        (false, true) => lines(plot, builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (false, false) => lines(plot, builder.build_cartesian_2d(x0..x1, y0..y1)?),
    }
}

/// A tick's text: plotters prints a log axis's ticks as computed, `9.999999999999999e-6`
/// where `1e-5` is meant, and the long labels overlap. Three significant digits, and powers of
/// ten outside 0.001..100000.
pub fn tick_label(v: f64) -> String {
    let magnitude = v.abs();
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if (1e-3..1e5).contains(&magnitude) {
        let digits = (2 - magnitude.log10().floor() as i32).max(0) as usize;
        let text = format!("{v:.digits$}");
        return match text.contains('.') {
            true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
            false => text,
        };
    }
    let text = format!("{v:.2e}");
    let (mantissa, exponent) = text.split_once('e').expect("exponent notation has an e");
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    format!("{mantissa}e{exponent}")
}

fn lines<'a, X, Y>(
    plot: &Plot,
    mut chart: ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(plot.x_label.as_str())
        .y_desc(plot.y_label.as_str())
        .x_label_formatter(&|v| tick_label(*v))
        .y_label_formatter(&|v| tick_label(*v))
        .draw()?;
    for (i, s) in plot.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tick_label;

    #[test]
    fn ticks_are_short_whatever_the_rounding() {
        assert_eq!(tick_label(9.999_999_999_999_999e-6), "1e-5");
        assert_eq!(tick_label(1e-6), "1e-6");
        assert_eq!(tick_label(2.5e-7), "2.5e-7");
        assert_eq!(tick_label(0.001), "0.001");
        assert_eq!(tick_label(0.1), "0.1");
        assert_eq!(tick_label(20.0), "20");
        assert_eq!(tick_label(12.5), "12.5");
        assert_eq!(tick_label(512.0), "512");
        assert_eq!(tick_label(32_768.0), "32768");
        assert_eq!(tick_label(3.0e6), "3e6");
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(-0.25), "-0.25");
    }
}
