//! Joint maps: the `joints:` list naming the DOF of each .seq column (issue 4).
