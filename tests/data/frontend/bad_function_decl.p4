// expect 3:8 Function 'twice' does not return a value on all paths
#include <core.p4>
bit<8> twice(in bit<8> x) {
    if (x == 1) {
        return x + x;
    }
}
