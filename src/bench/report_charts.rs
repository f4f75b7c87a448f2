//! The charts of `rookery bench --report`, drawn by `plotters` into SVG strings: a histogram
//! (one bar per latency bucket) and a line chart over time (one line per round). Each function
//! returns one `<svg>` element (its text escaped by the backend) to put inline in the HTML.
//!
//! It draws what it is given; it does not read the report's JSON (that is `report_html.rs`).

use plotters::coord::Shift;
use plotters::prelude::*;

/// The size of every chart, px.
const SIZE: (u32, u32) = (760, 300);

/// The line colours, one per round (repeated past the tenth).
const COLOURS: [RGBColor; 10] = [
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

/// A chart `plotters` could not draw.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart `{chart}`: {message}")]
pub struct ChartError {
    /// The chart's title.
    pub chart: String,
    /// What `plotters` said.
    pub message: String,
}

/// The colour of the `i`-th line.
pub fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// One named line of a chart: `(x, y)` points in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The legend's text.
    pub name: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// What a chart's drawing failed with: `plotters`' own error, whatever its backend.
type DrawFailure = Box<dyn std::error::Error>;

/// Runs `draw` on a fresh SVG canvas and returns the SVG text.
fn svg(
    title: &str,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), DrawFailure>,
) -> Result<String, ChartError> {
    let fail = |message: String| ChartError {
        chart: title.to_string(),
        message,
    };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        draw(&root).map_err(|e| fail(e.to_string()))?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    Ok(out)
}

/// The upper end of an axis showing values up to `max` (a tenth of headroom, at least 1).
fn top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// A line chart of `lines` over x (`x_desc`) and y (`y_desc`), both from 0; each point is also
/// marked, so a one-point line still shows.
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
) -> Result<String, ChartError> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    let x_max = top(all().map(|p| p.0).fold(0.0, f64::max));
    let y_max = top(all().map(|p| p.1).fold(0.0, f64::max));
    svg(title, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()?;
        for (i, line) in lines.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    c.stroke_width(2),
                ))?
                .label(line.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart.draw_series(line.points.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        if lines.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        Ok(())
    })
}

/// A histogram: one bar per `(label, count)`, in order, in colour `i`.
pub fn histogram(
    title: &str,
    x_desc: &str,
    bars: &[(String, u64)],
    i: usize,
) -> Result<String, ChartError> {
    // An integer range is inclusive as a discrete axis: `0..last` has `bars.len()` slots.
    let last = bars.len().saturating_sub(1);
    let n = bars.len().max(1);
    let y_max = top(bars.iter().map(|b| b.1 as f64).fold(0.0, f64::max)).ceil() as u64;
    svg(title, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0..last).into_segmented(), 0..y_max)?;
        let label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(k) => bars.get(*k).map(|b| b.0.clone()).unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&label)
            .x_desc(x_desc)
            .y_desc("tool calls")
            .draw()?;
        chart.draw_series(
            Histogram::vertical(&chart)
                .style(colour(i).filled())
                .margin(3)
                .data(bars.iter().enumerate().map(|(k, b)| (k, b.1))),
        )?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_is_one_svg_with_its_labels() {
        let svg = lines(
            "CPU <&> over time",
            "time (s)",
            "CPU %",
            &[
                Line {
                    name: "round 1".into(),
                    points: vec![(0.1, 50.0), (0.2, 80.0)],
                },
                Line {
                    name: "round 2".into(),
                    points: vec![(0.1, 40.0)],
                },
            ],
        )
        .unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("CPU &lt;&amp;&gt; over time"));
        assert!(svg.contains("round 2"));
    }

    #[test]
    fn a_histogram_labels_its_buckets_and_survives_no_data() {
        let svg = histogram(
            "latency",
            "µs",
            &[("10–20".into(), 3), ("20–50".into(), 1)],
            0,
        )
        .unwrap();
        assert!(svg.contains("10–20") && svg.contains("20–50"), "{svg}");
        assert!(histogram("empty", "µs", &[], 0).is_ok());
        assert!(lines("empty", "x", "y", &[]).is_ok());
    }
}
