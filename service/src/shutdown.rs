//! How a Cocktail process learns to stop: SIGTERM or SIGINT (Ctrl-C), turned into one
//! [`CancellationToken`] that the server and every background loop of the process watch.

use std::future::Future;

use tokio_util::sync::CancellationToken;

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called, not
/// when the future is first polled, so a signal that arrives in between is not lost (nor
/// kills the process with the default action). Call inside a Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    async move {
        #[cfg(unix)]
        match signals {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The process's shutdown token: cancelled when SIGTERM or SIGINT arrives (or when
/// anyone cancels it). Make one per process, at start, and hand clones (or child tokens)
/// to the server and to every background loop, which exit once it is cancelled. Call
/// inside a Tokio runtime.
pub fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let signal = shutdown_signal();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = signal => {
                tracing::info!("shutdown signal received");
                cancel.cancel();
            }
            () = cancel.cancelled() => {}
        }
    });
    token
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sigterm_cancels_the_token_and_its_children() {
        let token = shutdown_token();
        let child = token.child_token();
        // The handler is installed by `shutdown_token`, so the signal cannot kill the
        // test process.
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), child.cancelled())
            .await
            .unwrap();
        assert!(token.is_cancelled());
    }

    #[tokio::test]
    async fn a_token_cancelled_by_hand_ends_its_signal_watch() {
        let token = shutdown_token();
        let child = token.child_token();
        assert!(!child.is_cancelled());
        token.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(1), child.cancelled())
            .await
            .unwrap();
    }
}
