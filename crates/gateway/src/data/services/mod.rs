//! The background services of the data path: repair (`repair`, paced by `repair_pace` against
//! how busy clients keep the gateway, `foreground`), EC-Store's chunk mover (`mover`), orphan
//! collection (`orphans`). Each runs off the request path; calls `io`, `cluster`, `read`, `write`.

pub mod foreground;
pub mod mover;
pub mod orphans;
pub mod repair;
pub mod repair_pace;
