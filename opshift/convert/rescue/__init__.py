"""What convert tries when a plan is refused: fuse a region first (:mod:`.fuse_first`), fold
a constant computation first (:mod:`.fold_first`), or keep the branch an If takes
(:mod:`.taken_branch`). Each plans again on a changed copy and is reported."""
