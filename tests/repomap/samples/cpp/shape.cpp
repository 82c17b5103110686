#include "shape.hpp"

namespace geo {

std::string Shape::describe() const {
    return "area " + std::to_string(area());
}

double total_area(const Shape *shapes[], int count) {
    double sum = 0;
    for (int i = 0; i < count; ++i) {
        sum += shapes[i]->area();
    }
    return sum;
}

}  // namespace geo
