//! Fresh randomness for the IO crates, beside [`Clock`](crate::Clock): ids of events, inputs,
//! requests and planning records, and the secrets of bearer tokens. The domain never draws
//! (its ids come in through `Env`). One failure policy everywhere: no randomness is an error
//! ([`NoRandomness`]), never a zero, time-based or otherwise guessable value.

use std::fmt;

/// The operating system gave no randomness; nothing that needed it was made.
#[derive(Debug, thiserror::Error)]
#[error("no randomness from the operating system: {reason}")]
pub struct NoRandomness {
    reason: String,
}

impl NoRandomness {
    /// A failure, saying why.
    pub fn new(reason: impl fmt::Display) -> Self {
        Self {
            reason: reason.to_string(),
        }
    }
}

/// Where fresh random bytes come from.
pub trait Random: Send + Sync {
    /// Fills `bytes` with fresh random bytes, or fails without a partial answer.
    fn fill(&self, bytes: &mut [u8]) -> Result<(), NoRandomness>;

    /// A fresh random (version 4) UUID.
    fn uuid(&self) -> Result<uuid::Uuid, NoRandomness> {
        let mut bytes = [0u8; 16];
        self.fill(&mut bytes)?;
        Ok(uuid::Builder::from_random_bytes(bytes).into_uuid())
    }

    /// A fresh 128-bit id in lower-case hex (32 characters).
    fn hex_id(&self) -> Result<String, NoRandomness> {
        let mut bytes = [0u8; 16];
        self.fill(&mut bytes)?;
        Ok(hex::encode(bytes))
    }
}

/// The operating system's generator (`getrandom`).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemRandom;

impl Random for SystemRandom {
    fn fill(&self, bytes: &mut [u8]) -> Result<(), NoRandomness> {
        getrandom::fill(bytes).map_err(NoRandomness::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator that always fails.
    struct Broken;

    impl Random for Broken {
        fn fill(&self, _: &mut [u8]) -> Result<(), NoRandomness> {
            Err(NoRandomness::new("the generator is broken"))
        }
    }

    #[test]
    fn a_failing_source_gives_an_error_never_a_zero_id() {
        let broken: &dyn Random = &Broken;
        let error = broken.uuid().unwrap_err();
        assert!(error.to_string().contains("no randomness"), "{error}");
        assert!(broken.hex_id().is_err());
    }

    #[test]
    fn the_system_source_gives_distinct_ids() {
        let random: &dyn Random = &SystemRandom;
        let (a, b) = (random.uuid().unwrap(), random.uuid().unwrap());
        assert_ne!(a, b);
        assert_ne!(a, uuid::Uuid::nil());
        assert_eq!(random.hex_id().unwrap().len(), 32);
    }
}
