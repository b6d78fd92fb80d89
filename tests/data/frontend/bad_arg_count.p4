// expect 5:9 mark_to_drop: expected 0 or 1 arguments, got 2
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        mark_to_drop(sm, sm);
    }
}
