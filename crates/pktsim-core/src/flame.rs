//! Flame graphs of folded stacks, with frames coloured by the caller's choice (pktsim
//! colours them by cost group). Drawing is inferno's; this only sets it up.

use inferno::flamegraph::{self, color::PaletteMap, Options, Palette};

/// Render folded stack lines (`frame;frame;frame count`) as an SVG flame graph. `colors`
/// maps function names to RGB; other frames get inferno's "hot" palette. `legend` (label,
/// RGB) is drawn in a row below the graph, which grows to hold it.
pub fn svg_with_legend(
    folded: &[String],
    colors: &[(String, [u8; 3])],
    title: &str,
    count_name: &str,
    legend: &[(String, [u8; 3])],
) -> Result<String, String> {
    let svg = svg(folded, colors, title, count_name)?;
    if legend.is_empty() {
        return Ok(svg);
    }
    let grab = |key: &str| -> Option<u32> {
        let i = svg.find(key)? + key.len();
        svg[i..].split('"').next()?.parse().ok()
    };
    let (Some(width), Some(height)) = (grab("width=\""), grab("height=\"")) else { return Ok(svg) };
    let row = 24;
    let mut g = format!(
        "<g id=\"legend\" font-family=\"Verdana\" font-size=\"12\"><text x=\"10\" y=\"{}\">groups:</text>",
        height + 16
    );
    let mut x = 70;
    for (label, [r, gr, b]) in legend {
        let esc = label.replace('&', "&amp;").replace('<', "&lt;");
        g += &format!("<rect x=\"{x}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"rgb({r},{gr},{b})\"/><text x=\"{}\" y=\"{}\">{esc}</text>", height + 6, x + 16, height + 16);
        x += 24 + 8 * esc.len() as u32;
    }
    g += "</g>";
    let grown = height + row;
    let svg = svg.replacen(&format!("height=\"{height}\""), &format!("height=\"{grown}\""), 1).replacen(
        &format!("viewBox=\"0 0 {width} {height}\""),
        &format!("viewBox=\"0 0 {width} {grown}\""),
        1,
    );
    match svg.rfind("</svg>") {
        Some(i) => Ok(format!("{}{}{}", &svg[..i], g, &svg[i..])),
        None => Ok(svg),
    }
}

/// Render folded stack lines as an SVG flame graph (see [`svg_with_legend`]).
pub fn svg(folded: &[String], colors: &[(String, [u8; 3])], title: &str, count_name: &str) -> Result<String, String> {
    let mut palette = PaletteMap::default();
    for (name, [r, g, b]) in colors {
        palette.insert(name, flamegraph::color::Color { r: *r, g: *g, b: *b });
    }
    let mut opts = Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.to_string();
    opts.colors = Palette::Basic(flamegraph::color::BasicPalette::Hot);
    opts.palette_map = Some(&mut palette);
    opts.deterministic = true;
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, folded.iter().map(String::as_str), &mut out)
        .map_err(|e| format!("flame graph: {e}"))?;
    String::from_utf8(out).map_err(|e| format!("flame graph: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn frames_take_the_given_colours() {
        let lines =
            vec!["net_rx_action;ixgbe_poll;ixgbe_clean_rx_irq 30".to_string(), "net_rx_action;ip_rcv 10".to_string()];
        let svg = super::svg(&lines, &[("ip_rcv".into(), [1, 2, 3])], "t", "samples").unwrap();
        assert!(svg.contains("<svg"));
        assert!(svg.contains("rgb(1,2,3)"), "ip_rcv drawn in its colour");
        assert!(svg.contains("ixgbe_clean_rx_irq"));
    }

    #[test]
    fn the_legend_names_each_group_in_its_colour_below_the_graph() {
        let lines = vec!["net_rx_action;ip_rcv 10".to_string()];
        let plain = super::svg(&lines, &[], "t", "samples").unwrap();
        let svg = super::svg_with_legend(
            &lines,
            &[("ip_rcv".into(), [1, 2, 3])],
            "t",
            "samples",
            &[("C_prerouting".into(), [1, 2, 3])],
        )
        .unwrap();
        assert!(
            svg.contains("id=\"legend\"")
                && svg.contains(">C_prerouting</text>")
                && svg.contains("fill=\"rgb(1,2,3)\"")
        );
        let h = |s: &str| s.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse::<u32>().unwrap();
        assert_eq!(h(&svg), h(&plain) + 24, "the picture grows to hold the legend");
    }
}
