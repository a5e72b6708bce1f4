//! Flame graphs of folded stacks, with frames coloured by the caller's choice (pktsim
//! colours them by cost group). Drawing is inferno's; this only sets it up.

use inferno::flamegraph::{self, color::PaletteMap, Options, Palette};

/// Render folded stack lines (`frame;frame;frame count`) as an SVG flame graph. `colors`
/// maps function names to RGB; other frames get inferno's "hot" palette.
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
    flamegraph::from_lines(&mut opts, folded.iter().map(String::as_str), &mut out).map_err(|e| format!("flame graph: {e}"))?;
    String::from_utf8(out).map_err(|e| format!("flame graph: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn frames_take_the_given_colours() {
        let lines = vec!["net_rx_action;ixgbe_poll;ixgbe_clean_rx_irq 30".to_string(), "net_rx_action;ip_rcv 10".to_string()];
        let svg = super::svg(&lines, &[("ip_rcv".into(), [1, 2, 3])], "t", "samples").unwrap();
        assert!(svg.contains("<svg"));
        assert!(svg.contains("rgb(1,2,3)"), "ip_rcv drawn in its colour");
        assert!(svg.contains("ixgbe_clean_rx_irq"));
    }
}
