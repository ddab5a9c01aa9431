//! Unit I/O: the storage nodes as the data path reaches them (`connections`, one client per
//! node), or the S3 backend's keys (`backend`); reading, writing and deleting units and decoding
//! (`stripe_io`); what is written beside a unit (`descriptor`) and in a packed replica unit
//! (`replica`); where a new stripe's units go (`placement`); what each node's speed and load look
//! like (`node_loads`); recording units missing (`missing`). The bottom of the data path: must not
//! decide which units a read or write takes, nor call any folder above.

pub mod backend;
pub mod connections;
pub mod descriptor;
pub mod missing;
pub mod node_loads;
pub mod placement;
pub mod replica;
pub mod stripe_io;
