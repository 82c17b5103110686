pub mod shapes {
    pub trait Area {
        fn area(&self) -> f64;
    }

    pub struct Circle {
        pub radius: f64,
    }

    pub struct Rect {
        pub width: f64,
        pub height: f64,
    }

    impl Area for Circle {
        fn area(&self) -> f64 {
            std::f64::consts::PI * self.radius * self.radius
        }
    }

    impl Area for Rect {
        fn area(&self) -> f64 {
            self.width * self.height
        }
    }

    impl Circle {
        pub fn new(radius: f64) -> Self {
            Circle { radius }
        }
    }
}

pub const MAX_SHAPES: usize = 64;

pub fn total_area(shapes: &[Box<dyn shapes::Area>]) -> f64 {
    shapes.iter().map(|s| s.area()).sum()
}
