//! agentroom-capabilities: Capability and Binding resources (`planspec.io/v1alpha1`, YAML, seed
//! 002), their validation, the registry (phases, replacements, requirements), binding
//! resolution, and the domain's [`agentroom_domain::catalog::CapabilityCatalog`].
//!
//! It does no IO: callers read files and hand in their text with a name for errors.
//! [`Resources::parse`] reads and validates documents one by one; [`Catalog::new`] checks them
//! together (duplicate names, conflicting rules, replacement and requirement cycles) and
//! answers the engine at plan admission.

mod bindings;
mod catalog;
mod error;
mod format;
mod parse;
mod registry;
mod resource;
mod schema;
mod yaml;

pub use bindings::Bindings;
pub use catalog::{Catalog, Resolution, ResolveError};
pub use error::{ErrorKind, Location, ResourceError, ResourceErrors};
pub use format::Format;
pub use parse::Resources;
pub use registry::Registry;
pub use resource::{
    API_VERSION, Binding, BindingRule, Capability, CapabilityRef, CapabilitySpec, CapabilityStatus,
    DEFAULT_NAMESPACE, EFFECT_ANNOTATION, InputDef, Metadata, OutputDef, Phase, Requirement,
    Selector, is_dns_label, is_field_name,
};
pub use schema::{ValueError, ValueSchema, ValueType};
