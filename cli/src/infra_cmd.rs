//! `switchyard infra render|check`: keep `infra/template.yaml` in step with `routing.yaml`.
//!
//! `render` prints the SAM template the manifest needs; `check` reads a template and lists every
//! way it disagrees with the manifest (see [`switchyard_infra::check`]). Argument parsing lives with
//! the rest of the CLI; these functions take what it parsed.

use std::io::Write;
use std::path::Path;
use switchyard_infra as sam;
use switchyard_model::manifest::Manifest;

/// Exit code: the template agrees with the manifest.
pub const EXIT_OK: u8 = 0;
/// Exit code: the template disagrees with the manifest; each problem was printed.
pub const EXIT_DRIFT: u8 = 1;
/// Exit code: the template could not be read.
pub const EXIT_UNREADABLE: u8 = 2;

/// The SAM template for `manifest`: what `switchyard infra render` prints.
pub fn render(manifest: &Manifest) -> String {
    sam::render(manifest)
}

/// Checks the template at `template_path` against `manifest`, writes one line per problem to
/// `out`, and returns the exit code ([`EXIT_OK`], [`EXIT_DRIFT`] or [`EXIT_UNREADABLE`]).
///
/// A template that agrees with the manifest but is not byte for byte what `render` writes (a
/// hand edit, another formatter) passes, with a note saying so.
pub fn check(template_path: &Path, manifest: &Manifest, out: &mut dyn Write) -> u8 {
    let path = template_path.display();
    let text = match std::fs::read_to_string(template_path) {
        Ok(text) => text,
        Err(e) => {
            let _ = writeln!(out, "{path}: cannot read the template: {e}");
            return EXIT_UNREADABLE;
        }
    };
    let problems = sam::check(&text, manifest);
    if problems.is_empty() {
        let _ = if text == sam::render(manifest) {
            writeln!(out, "{path}: agrees with manifest `{}`", manifest.name)
        } else {
            writeln!(
                out,
                "{path}: agrees with manifest `{}`, but differs from what `switchyard infra render` writes; run `{}` to normalise it",
                manifest.name,
                sam::RENDER_COMMAND
            )
        };
        return EXIT_OK;
    }
    for problem in &problems {
        let _ = writeln!(out, "{path}: {problem}");
    }
    let _ = writeln!(
        out,
        "{path}: {} problem{}; fix routing.yaml, or run `{}`",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        sam::RENDER_COMMAND
    );
    EXIT_DRIFT
}
