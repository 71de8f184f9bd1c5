//! The `emberkv-server` binary: parse the command line, serve.

use std::process::ExitCode;

use emberkv_server::config::{self, Action};

fn main() -> ExitCode {
    let args = std::env::args_os().skip(1).collect();
    match config::from_args(args) {
        Ok(Action::Help) => {
            print!("{}", config::help());
            ExitCode::SUCCESS
        }
        Ok(Action::Version) => {
            println!("{}", config::version());
            ExitCode::SUCCESS
        }
        Ok(Action::Run(config)) => match emberkv_server::server::run(*config) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("emberkv-server: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("emberkv-server: {e}");
            ExitCode::FAILURE
        }
    }
}
