//! Figures of a report (CDF lines, box plots, bars of load per node, and
//! latency-vs-load panels), each drawn once through plotters onto either
//! backend: SVG (text as `<text>`, for the HTML page) or a bitmap encoded as
//! PNG (text rasterised from the embedded DejaVu Sans, so no system font or
//! font library is needed and the PNG looks the same on every machine).
//!
//! Owns: the [`Figure`] trait, the four figure types, colours, tick labels,
//! [`render`], and [`write_line_panels`] (other experiments' line figures). Must not: compute statistics (figures get points and box
//! statistics ready-made) or decide file names beyond the stem it is given.

use crate::stats::BoxStats;
use anyhow::{Context, anyhow};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Font family every figure uses; registered once with the embedded font.
const FONT: &str = "sans-serif";

/// Tableau 10: distinguishable, and legible for the common colour-vision
/// deficiencies; a policy keeps its colour across an experiment's figures.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(crate) fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// Registers the embedded font for the bitmap backend's text (the SVG
/// backend writes text as text, but plotters lays out labels with the same
/// font metrics on both).
fn ensure_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // The bytes are a valid TrueType font shipped in the dejavu crate;
        // failure would be a packaging bug, and text would be missing.
        let normal = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let bold = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
        assert!(normal.is_ok() && bold.is_ok(), "the embedded DejaVu Sans font did not load");
    });
}

/// A figure that draws itself on any plotters backend.
pub(crate) trait Figure {
    /// Size in pixels.
    fn size(&self) -> (u32, u32) {
        (900, 560)
    }

    /// Draws the figure on `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Draws `figure` as `dir/stem.svg` and, if `png`, `dir/stem.png`; returns
/// the written paths relative to the report folder (`plots/…`).
pub(crate) fn render(figure: &impl Figure, dir: &Path, stem: &str, png: bool) -> anyhow::Result<Vec<PathBuf>> {
    ensure_font();
    let (width, height) = figure.size();
    let mut written = Vec::new();

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        figure.draw(&root).with_context(|| format!("drawing {stem}.svg"))?;
        root.present()?;
    }
    let svg_name = format!("{stem}.svg");
    fs::write(dir.join(&svg_name), svg.as_bytes()).with_context(|| format!("writing {svg_name}"))?;
    written.push(Path::new("plots").join(svg_name));

    if png {
        let mut pixels = vec![0u8; width as usize * height as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut pixels, (width, height)).into_drawing_area();
            root.fill(&WHITE)?;
            figure.draw(&root).with_context(|| format!("drawing {stem}.png"))?;
            root.present()?;
        }
        let png_name = format!("{stem}.png");
        let bytes = encode_png(&pixels, width, height)?;
        fs::write(dir.join(&png_name), bytes).with_context(|| format!("writing {png_name}"))?;
        written.push(Path::new("plots").join(png_name));
    }
    Ok(written)
}

/// One panel for [`write_line_panels`]: a caption, the y axis label (with its unit), and named
/// lines of `(x, y)` points, drawn in order.
#[derive(Clone, Debug)]
pub struct LinePanel {
    /// Caption above the panel.
    pub caption: String,
    /// Label of the y axis, with its unit.
    pub y_label: String,
    /// `(legend entry, points)` per line.
    pub lines: Vec<(String, Vec<(f64, f64)>)>,
}

/// Draws `panels` side by side over one x axis as `plots_dir/stem.svg` (and `.png` if `png`),
/// for experiments whose figures are not a report's standard ones; returns the paths written,
/// relative to the results folder (`plots/…`). Line `i` of every panel has colour `i`.
pub fn write_line_panels(
    plots_dir: &Path,
    stem: &str,
    title: &str,
    x_label: &str,
    panels: &[LinePanel],
    png: bool,
) -> anyhow::Result<Vec<PathBuf>> {
    fs::create_dir_all(plots_dir).with_context(|| format!("creating {}", plots_dir.display()))?;
    let figure = PanelFigure {
        title: title.to_owned(),
        x_label: x_label.to_owned(),
        panels: panels
            .iter()
            .map(|panel| Panel {
                caption: panel.caption.clone(),
                y_label: panel.y_label.clone(),
                series: panel
                    .lines
                    .iter()
                    .enumerate()
                    .map(|(colour, (label, points))| Series { label: label.clone(), colour, points: points.clone() })
                    .collect(),
            })
            .collect(),
    };
    render(&figure, plots_dir, stem, png)
}

/// RGB8 pixels as a PNG file.
pub(crate) fn encode_png(pixels: &[u8], width: u32, height: u32) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| anyhow!("PNG header: {e}"))?;
    writer.write_image_data(pixels).map_err(|e| anyhow!("PNG data: {e}"))?;
    writer.finish().map_err(|e| anyhow!("PNG end: {e}"))?;
    Ok(bytes)
}

/// A tick label: up to four decimals with trailing zeros dropped, or
/// `1e-5`-style for very small or large values.
fn tick(value: f64) -> String {
    let magnitude = value.abs();
    if value == 0.0 {
        "0".to_owned()
    } else if (1e-3..1e5).contains(&magnitude) {
        let text = format!("{value:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        format!("{value:.0e}")
    }
}

fn caption_style() -> TextStyle<'static> {
    (FONT, 22).into_font().style(FontStyle::Bold).into()
}

fn label_style() -> TextStyle<'static> {
    (FONT, 14).into()
}

fn axis_style() -> TextStyle<'static> {
    (FONT, 16).into()
}

/// One line of a figure.
#[derive(Clone, Debug)]
pub(crate) struct Series {
    /// Legend entry (the policy).
    pub label: String,
    /// Palette index.
    pub colour: usize,
    /// Points `(x, y)`, in drawing order.
    pub points: Vec<(f64, f64)>,
}

/// Empirical CDFs of one metric, one line per policy.
pub(crate) struct CdfFigure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Logarithmic x axis; zero values are drawn at the smallest positive one.
    pub log_x: bool,
}

impl Figure for CdfFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let xs = || self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let x_max = xs().fold(0.0f64, f64::max);
        let x_min_positive = xs().filter(|&x| x > 0.0).fold(f64::INFINITY, f64::min);
        if self.log_x && x_min_positive.is_finite() {
            let (low, high) = if x_min_positive < x_max {
                (x_min_positive, x_max)
            } else {
                (x_min_positive / 2.0, x_min_positive * 2.0)
            };
            self.draw_on(root, (low..high).log_scale(), low)
        } else {
            let high = if x_max > 0.0 { x_max * 1.02 } else { 1e-6 };
            self.draw_on(root, 0.0..high, 0.0)
        }
    }
}

impl CdfFigure {
    /// Draws on an x axis built from `x_spec`; values below `x_floor` (the
    /// zeros of a log axis) are drawn at the floor and the label says so.
    fn draw_on<DB, X>(&self, root: &DrawingArea<DB, Shift>, x_spec: X, x_floor: f64) -> anyhow::Result<()>
    where
        DB: DrawingBackend,
        DB::ErrorType: 'static,
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let floored = self.series.iter().any(|s| s.points.iter().any(|p| p.0 < x_floor));
        let x_label = if floored {
            format!("{} (values of 0 drawn at the left edge)", self.x_label)
        } else {
            self.x_label.clone()
        };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, caption_style())
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(64)
            .build_cartesian_2d(x_spec, 0.0..1.0f64)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(&self.y_label)
            // Few enough labels that a log axis's 0.08 and 0.09 do not collide.
            .x_labels(8)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .label_style(label_style())
            .axis_desc_style(axis_style())
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        for series in &self.series {
            let style = colour(series.colour).stroke_width(2);
            let points = series.points.iter().map(|&(x, y)| (x.max(x_floor), y));
            chart
                .draw_series(LineSeries::new(points, style))?
                .label(&series.label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        chart
            .configure_series_labels()
            .label_font(label_style())
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        Ok(())
    }
}

/// One box of a box plot.
#[derive(Clone, Debug)]
pub(crate) struct BoxItem {
    pub label: String,
    pub colour: usize,
    pub stats: BoxStats,
}

/// Box plots of one metric, one box per policy. The y axis reaches the
/// highest whisker or p99; a maximum beyond it is written as text at the
/// top, so that one extreme request does not flatten every box.
pub(crate) struct BoxFigure {
    pub title: String,
    pub y_label: String,
    pub boxes: Vec<BoxItem>,
}

impl Figure for BoxFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let count = self.boxes.len().max(1);
        let top_data = self.boxes.iter().map(|b| b.stats.whisker_high_s.max(b.stats.p99_s)).fold(0.0f64, f64::max);
        let y_top = if top_data > 0.0 { top_data * 1.12 } else { 1e-6 };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, caption_style())
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5..(count as f64 - 0.5), 0.0..y_top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(&self.y_label)
            .x_desc("policy")
            .y_label_formatter(&|v| tick(*v))
            .label_style(label_style())
            .axis_desc_style(axis_style())
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let half_width = 0.22;
        for (index, item) in self.boxes.iter().enumerate() {
            let x = index as f64;
            let stats = &item.stats;
            let fill = colour(item.colour);
            chart.draw_series([
                Rectangle::new([(x - half_width, stats.q3_s), (x + half_width, stats.q1_s)], fill.mix(0.35).filled()),
                Rectangle::new([(x - half_width, stats.q3_s), (x + half_width, stats.q1_s)], fill.stroke_width(2)),
            ])?;
            let whiskers = [
                vec![(x, stats.q3_s), (x, stats.whisker_high_s)],
                vec![(x, stats.q1_s), (x, stats.whisker_low_s)],
                vec![(x - half_width / 2.0, stats.whisker_high_s), (x + half_width / 2.0, stats.whisker_high_s)],
                vec![(x - half_width / 2.0, stats.whisker_low_s), (x + half_width / 2.0, stats.whisker_low_s)],
                vec![(x - half_width, stats.median_s), (x + half_width, stats.median_s)],
            ];
            chart.draw_series(whiskers.into_iter().map(|line| PathElement::new(line, BLACK.stroke_width(2))))?;
            chart.draw_series(std::iter::once(TriangleMarker::new((x, stats.p99_s), 6, BLACK.filled())))?;
            if stats.max_s <= y_top {
                chart.draw_series(std::iter::once(Circle::new((x, stats.max_s), 5, BLACK.stroke_width(2))))?;
            } else {
                let at = chart.backend_coord(&(x, y_top));
                root.draw(&Text::new(
                    format!("max {} s ↑", tick(stats.max_s)),
                    (at.0, at.1 + 4),
                    label_style().pos(Pos::new(HPos::Center, VPos::Top)),
                ))?;
            }
            let at = chart.backend_coord(&(x, 0.0));
            root.draw(&Text::new(
                item.label.clone(),
                (at.0, at.1 + 8),
                label_style().pos(Pos::new(HPos::Center, VPos::Top)),
            ))?;
        }
        Ok(())
    }
}

/// A bar per storage node (load), with the mean as a line.
pub(crate) struct BarFigure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub values: Vec<f64>,
    pub mean: Option<f64>,
    pub colour: usize,
}

impl Figure for BarFigure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let count = self.values.len().max(1) as f64;
        let top_data = self.values.iter().copied().fold(0.0f64, f64::max);
        let y_top = if top_data > 0.0 { top_data * 1.1 } else { 1.0 };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, caption_style())
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.5..(count - 0.5), 0.0..y_top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| tick(*v))
            .label_style(label_style())
            .axis_desc_style(axis_style())
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        let fill = colour(self.colour);
        chart.draw_series(self.values.iter().enumerate().map(|(node, &value)| {
            let x = node as f64;
            Rectangle::new([(x - 0.4, 0.0), (x + 0.4, value)], fill.filled())
        }))?;
        if let Some(mean) = self.mean {
            let style = BLACK.stroke_width(2);
            chart
                .draw_series(LineSeries::new([(-0.5, mean), (count - 0.5, mean)], style))?
                .label(format!("mean {}", tick(mean)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            chart
                .configure_series_labels()
                .label_font(label_style())
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        Ok(())
    }
}

/// One panel of a [`PanelFigure`]: its caption, y axis label (with unit) and lines.
#[derive(Clone, Debug)]
pub(crate) struct Panel {
    pub caption: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// Panels side by side over one shared x axis, with lines and markers: latency against
/// load (one panel per statistic, one line per policy), or a fit's loss over its grid.
pub(crate) struct PanelFigure {
    pub title: String,
    pub x_label: String,
    pub panels: Vec<Panel>,
}

impl Figure for PanelFigure {
    fn size(&self) -> (u32, u32) {
        (480 * self.panels.len().max(1) as u32, 520)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let body = root.titled(&self.title, caption_style())?;
        let areas = body.split_evenly((1, self.panels.len().max(1)));
        let all_points = || self.panels.iter().flat_map(|panel| panel.series.iter().flat_map(|s| s.points.iter()));
        let x_low = all_points().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_high = all_points().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let (x_low, x_high) = if x_low.is_finite() && x_high > x_low {
            let pad = (x_high - x_low) * 0.04;
            (x_low - pad, x_high + pad)
        } else if x_low.is_finite() {
            (x_low - 0.5, x_low + 0.5)
        } else {
            (0.0, 1.0)
        };
        for (index, (panel, area)) in self.panels.iter().zip(areas.iter()).enumerate() {
            let series = &panel.series;
            let y_max = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0f64, f64::max);
            let y_top = if y_max > 0.0 { y_max * 1.1 } else { 1e-6 };
            let mut chart = ChartBuilder::on(area)
                .caption(&panel.caption, axis_style())
                .margin(12)
                .x_label_area_size(50)
                .y_label_area_size(64)
                .build_cartesian_2d(x_low..x_high, 0.0..y_top)?;
            chart
                .configure_mesh()
                .x_desc(&self.x_label)
                .y_desc(&panel.y_label)
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .label_style(label_style())
                .axis_desc_style(label_style())
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
            for line in series.iter() {
                let style = colour(line.colour).stroke_width(2);
                chart
                    .draw_series(LineSeries::new(line.points.iter().copied(), style))?
                    .label(&line.label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
                chart.draw_series(line.points.iter().map(|&point| Circle::new(point, 3, style.filled())))?;
            }
            if index == 0 && !series.is_empty() {
                chart
                    .configure_series_labels()
                    .label_font(label_style())
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.05), "0.05");
        assert_eq!(tick(0.125), "0.125");
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(0.0001), "1e-4");
        assert_eq!(tick(1e6), "1e6");
    }
}
