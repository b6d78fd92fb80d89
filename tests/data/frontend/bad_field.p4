// expect 5:29 standard_metadata_t has no field nosuch
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = sm.nosuch;
    }
}
