//! Issuing bearer tokens with the operating system's randomness: the one place the host draws
//! a token's id and secret (the `TokenStore` port takes the bytes from its caller).

use agentroom_ports::tokens::RANDOM_BYTES;
use agentroom_ports::{IssuedToken, NewToken, TokenError, TokenMaterial, TokenStore};

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The operating system gave no randomness: no token is better than a guessable one.
    #[error("no randomness from the operating system for a token: {0}")]
    NoRandomness(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] TokenError),
}

/// Issues a token for `new` from 40 fresh random bytes; its text is shown once, here.
pub async fn issue_token(
    tokens: &dyn TokenStore,
    new: NewToken,
) -> Result<IssuedToken, IssueError> {
    let mut bytes = [0u8; RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|error| IssueError::NoRandomness(error.to_string()))?;
    Ok(tokens
        .issue_token(new, TokenMaterial::from_random(bytes))
        .await?)
}
