package shop;

import java.util.ArrayList;
import java.util.List;

public class Order {
    private final List<Priced> lines = new ArrayList<>();

    public Order add(Priced item) {
        lines.add(item);
        return this;
    }

    public double total() {
        double sum = 0;
        for (Priced p : lines) {
            sum += p.price();
        }
        return sum;
    }

    public static void main(String[] args) {
        Order order = new Order().add(new Product("tea", 3.5));
        System.out.println(order.total());
    }
}
