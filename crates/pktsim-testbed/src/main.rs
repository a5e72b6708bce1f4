//! The `pktsim-tb` binary: [`pktsim_testbed::run`] with the process's arguments.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(pktsim_testbed::run(std::env::args_os().skip(1)))
}
