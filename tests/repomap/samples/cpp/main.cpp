#include <iostream>
#include "shape.hpp"

int main() {
    geo::Square a(2.0);
    const geo::Shape *shapes[] = {&a};
    std::cout << geo::total_area(shapes, 1) << "\n" << a.describe() << "\n";
    return 0;
}
