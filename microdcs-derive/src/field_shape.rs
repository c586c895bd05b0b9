//! Field types that plainly cannot serve a binding, told from their
//! spelling before rustc sees them, so the error is ours, at the binding,
//! with the fix. A leaf: it knows fields by name and type only.

use syn::{Ident, Type};

use crate::ctxt::Ctxt;

/// What a field's type plainly is, from its spelling: `Option`, text or a
/// number; `None` for anything else (an alias may be anything, so it is
/// left to rustc).
fn plain_shape(ty: &Type) -> Option<&'static str> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?.ident.to_string();
    Some(match last.as_str() {
        "Option" => "an `Option`",
        "String" | "str" => "text",
        "Vec" => "a `Vec`",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" | "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "f32"
        | "f64" => "a number",
        _ => return None,
    })
}

/// `when = field` on a field that is plainly not a `bool`: our message at
/// the binding, with the method to write instead (rustc would only say
/// "expected `bool`", and for an `Option<bool>` suggest `.expect`).
pub(crate) fn when(cx: &mut Ctxt, field: &Ident, ty: &Type) {
    let Some(shape) = plain_shape(ty) else { return };
    let name = field.to_string();
    let body = if shape == "an `Option`" { format!("self.{name} == Some(true)") } else { "...".to_owned() };
    cx.error_spanned_by(
        field,
        format_args!(
            "`when` takes a `bool`, and `{name}` is {shape}: bind a `&self` method that says when the document \
             is a member, e.g. `when = is_{name}()` with `fn is_{name}(&self) -> bool {{ {body} }}`",
        ),
    );
}

/// A list score on an `Option` field: every listed document has a score,
/// so point at the index that leaves out documents without one.
pub(crate) fn list_score(cx: &mut Ctxt, field: &Ident, ty: &Type) {
    if plain_shape(ty) != Some("an `Option`") {
        return;
    }
    cx.error_spanned_by(
        field,
        format_args!(
            "a list score cannot be an `Option`: every document of the type is in its list; for a score some \
             documents lack, use a sorted index, `sorted(key = \"...:{{scope}}\", score = {})`, which leaves out \
             documents whose score is `None`",
            field
        ),
    );
}
