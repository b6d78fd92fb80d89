// expect 5:9 undeclared_var: declaration not found
#include <v1model.p4>
control C(inout standard_metadata_t sm) {
    apply {
        undeclared_var = 1;
    }
}
