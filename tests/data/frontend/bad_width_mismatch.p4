// expect 7:9 Cannot unify bit<16> to bit<8>
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<8> a = 1;
        bit<16> b = 2;
        a = b;
    }
}
