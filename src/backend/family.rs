//! The registry of drive families ([`FAMILIES`]): every family motiond speaks, found by its
//! `protocol:` name, and their words for fault and warning codes. What a family is: the
//! [`Family`] trait; how to add one: the [module documentation of `backend`](crate::backend).

use crate::backend::bus::{Family, Medium};
use crate::backend::{
    FaultKind, cia402, damiao, dynamixel, feetech, mit, moteus, odrive, robstride,
};

/// Every family motiond speaks, by `protocol:` name. Adding a family is adding its folder under
/// `src/backend/` and one line here.
pub static FAMILIES: &[&dyn Family] = &[
    &cia402::Cia402,
    &odrive::Odrive,
    &mit::Mit,
    &dynamixel::Dynamixel,
    &damiao::DAMIAO,
    &damiao::DAMIAO_FD,
    &robstride::Robstride,
    &moteus::Moteus,
    &feetech::FEETECH,
    &feetech::FEETECH_SCS,
];

/// The family named `name` (a `protocol:` value).
pub fn find(name: &str) -> Option<&'static dyn Family> {
    FAMILIES.iter().copied().find(|f| f.name() == name)
}

/// The names of the families on `medium`, for messages.
pub fn names_on(medium: Medium) -> Vec<&'static str> {
    FAMILIES
        .iter()
        .filter(|f| f.medium() == medium)
        .map(|f| f.name())
        .collect()
}

/// A warning a drive or bus reported (`LinkStatus` code), in the words of `who` (a family name
/// or a transport name).
pub fn warning_words(who: &str, code: u32) -> String {
    if who == "slcan" {
        return crate::backend::transport::slcan::codec::status_words(code as u8);
    }
    find(who)
        .and_then(|f| f.warning_words(code))
        .unwrap_or_else(|| format!("code {code:#x}"))
}

/// A fault's code in the words of `who` (a family or transport name), where the code says more
/// than its kind; `None` where the kind and the hex code are all there is.
pub fn fault_words(who: &str, kind: FaultKind, code: u32) -> Option<String> {
    if who == "slcan" {
        return (kind == FaultKind::BusOff)
            .then(|| crate::backend::transport::slcan::codec::status_words(code as u8));
    }
    find(who)?.fault_words(kind, code)
}
