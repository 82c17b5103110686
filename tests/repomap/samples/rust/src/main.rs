use geometry::shapes::{Area, Circle, Rect};
use geometry::total_area;

fn main() {
    let shapes: Vec<Box<dyn Area>> = vec![
        Box::new(Circle::new(1.0)),
        Box::new(Rect { width: 2.0, height: 3.0 }),
    ];
    println!("{}", total_area(&shapes));
}
