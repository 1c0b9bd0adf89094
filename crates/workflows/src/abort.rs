//! Cooperative cancellation: the runner triggers an [`Abort`] when the lease is fenced, the
//! operation is cancelled (D3) or the lease is lost; a provider watches it and stops.

use tokio::sync::watch;

/// Why a call was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbortReason {
    /// A control change asked for it (D3): the heartbeat answered `cancel`.
    Cancelled,
    /// Another runner claimed the operation: this generation's result will be dropped.
    Fenced,
    /// No heartbeat reached the store for a whole lease: the lease may be lost.
    LeaseLost,
}

impl AbortReason {
    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            AbortReason::Cancelled => "cancelled",
            AbortReason::Fenced => "fenced",
            AbortReason::LeaseLost => "lease lost",
        }
    }
}

/// The provider's side: watch it and stop cooperatively once it fires. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Abort {
    rx: watch::Receiver<Option<AbortReason>>,
}

/// The runner's side: fires the [`Abort`]s made with it. The first reason wins.
#[derive(Debug)]
pub struct AbortTrigger {
    tx: watch::Sender<Option<AbortReason>>,
}

impl Abort {
    /// A new trigger and the signal it fires.
    pub fn new() -> (AbortTrigger, Abort) {
        let (tx, rx) = watch::channel(None);
        (AbortTrigger { tx }, Abort { rx })
    }

    /// A signal that never fires (for calls nobody can abort).
    pub fn never() -> Abort {
        Abort::new().1
    }

    /// Why it fired, if it has.
    pub fn reason(&self) -> Option<AbortReason> {
        *self.rx.borrow()
    }

    /// Whether it has fired.
    pub fn is_aborted(&self) -> bool {
        self.reason().is_some()
    }

    /// Waits until it fires; never resolves if its trigger is dropped without firing.
    pub async fn aborted(&self) -> AbortReason {
        let mut rx = self.rx.clone();
        if let Ok(reason) = rx.wait_for(Option::is_some).await
            && let Some(reason) = *reason
        {
            return reason;
        }
        std::future::pending().await
    }
}

impl AbortTrigger {
    /// Fires the signal with `reason`, unless it has fired already.
    pub fn abort(&self, reason: AbortReason) {
        self.tx.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(reason);
            true
        });
    }

    /// Why it fired, if it has.
    pub fn reason(&self) -> Option<AbortReason> {
        *self.tx.borrow()
    }

    /// Another signal fired by this trigger.
    pub fn signal(&self) -> Abort {
        Abort {
            rx: self.tx.subscribe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_wins_and_every_signal_sees_it() {
        let (trigger, abort) = Abort::new();
        let other = trigger.signal();
        assert!(!abort.is_aborted());
        trigger.abort(AbortReason::Cancelled);
        trigger.abort(AbortReason::Fenced);
        assert_eq!(abort.aborted().await, AbortReason::Cancelled);
        assert_eq!(other.reason(), Some(AbortReason::Cancelled));
        assert_eq!(trigger.reason(), Some(AbortReason::Cancelled));
    }

    #[tokio::test]
    async fn a_dropped_trigger_never_fires() {
        let abort = Abort::never();
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), abort.aborted()).await;
        assert!(waited.is_err());
        assert!(!abort.is_aborted());
    }
}
