// expect 5:20 8w256: value does not fit in bit<8>
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        bit<8> x = 8w256;
    }
}
