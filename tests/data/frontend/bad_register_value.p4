// expect 5:24 Cannot unify bit<8> to bit<32>
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    register<bit<32>>(16) r;
    apply { r.write(0, 8w1); }
}
