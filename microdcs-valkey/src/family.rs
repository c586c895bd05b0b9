//! The key families of the runtime's own services, taken from specs.
//!
//! A service holds the [`FamilySpec`] it writes (a built-in one from
//! `microdcs_schema::builtin`, or one the caller passed and we checked), and
//! renders keys from it. Nothing is looked up by name, and nothing falls
//! back to a default when a spec does not fit: a custom family of the wrong
//! shape is refused when the service is built.

#[cfg(feature = "coordination")]
use microdcs_schema::KeyType;
use microdcs_schema::{FamilySpec, KeyPrefix, KeyTemplate};

use crate::error::{Error, Result};

/// A family whose template was checked to have exactly the placeholders a
/// service fills, in that order. The template is parsed once, when the
/// service is built, not on every key.
#[derive(Debug, Clone)]
pub(crate) struct FamilyKey {
    #[cfg_attr(not(feature = "coordination"), allow(dead_code, reason = "named in the errors of a caller's family"))]
    spec: FamilySpec<'static>,
    template: std::result::Result<KeyTemplate, String>,
}

impl FamilyKey {
    /// One of the runtime's own families (valid by the schema crate's
    /// tests; should one not parse, every key of it is a typed error).
    pub(crate) fn builtin(spec: FamilySpec<'static>) -> Self {
        let template = KeyTemplate::parse(spec.key)
            .map_err(|_| format!("family `{}` has an invalid template `{}`", spec.name, spec.key));
        FamilyKey { spec, template }
    }

    /// A caller's family for the role `what`: it must parse, be of type
    /// `key_type`, and have exactly `placeholders` in that order.
    #[cfg(feature = "coordination")]
    pub(crate) fn checked(
        what: &str,
        spec: FamilySpec<'static>,
        key_type: KeyType,
        placeholders: &[&str],
    ) -> Result<Self> {
        let bad =
            |why: String| Error::InvalidArgument(format!("family `{}` (`{}`) as {what}: {why}", spec.name, spec.key));
        let t = KeyTemplate::parse(spec.key)
            .map_err(|es| bad(es.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
        if spec.key_type != key_type {
            return Err(bad(format!("must be a {}, not a {}", key_type.type_name(), spec.key_type.type_name())));
        }
        if !t.placeholders().eq(placeholders.iter().copied()) {
            let want: Vec<String> = placeholders.iter().map(|p| format!("{{{p}}}")).collect();
            return Err(bad(format!("must have exactly the placeholders {}", want.join(", "))));
        }
        Ok(FamilyKey { spec, template: Ok(t) })
    }

    /// The family's spec.
    #[cfg(feature = "coordination")]
    pub(crate) const fn spec(&self) -> &FamilySpec<'static> {
        &self.spec
    }

    /// The key for `values` (in placeholder order).
    pub(crate) fn render(&self, prefix: &KeyPrefix, values: &[&str]) -> Result<String> {
        let t = self.template.as_ref().map_err(|why| Error::InvalidArgument(why.clone()))?;
        t.render(prefix, values).map_err(crate::error::render_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use microdcs_schema::builtin;

    #[test]
    fn builtins_render() {
        let p = KeyPrefix::default();
        assert_eq!(FamilyKey::builtin(builtin::DEDUPE).render(&p, &["ab"]).unwrap(), "microdcs:ce:dedupe:ab");
        assert_eq!(FamilyKey::builtin(builtin::FINGERPRINTS).render(&p, &[]).unwrap(), "microdcs:schema:fingerprints");
        assert_eq!(FamilyKey::builtin(builtin::CLUSTER_PROBE).render(&p, &[]).unwrap(), "microdcs:cluster-probe");
    }

    #[test]
    fn a_custom_family_of_the_wrong_shape_is_refused() {
        let f = |key| FamilySpec::new("locks", key, KeyType::Hash);
        assert!(FamilyKey::checked("lease record", f("locks:{#name}"), KeyType::Hash, &["name"]).is_ok());
        let e = FamilyKey::checked("lease record", f("locks:{name}:{x}"), KeyType::Hash, &["name"]).unwrap_err();
        assert!(e.to_string().contains("exactly the placeholders {name}"), "{e}");
        let e = FamilyKey::checked("lease record", f("locks:{#name}"), KeyType::String, &["name"]).unwrap_err();
        assert!(e.to_string().contains("must be a string"), "{e}");
        assert!(FamilyKey::checked("x", f("locks::{#name}"), KeyType::Hash, &["name"]).is_err());
    }
}
