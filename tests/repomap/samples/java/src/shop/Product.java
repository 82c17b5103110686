package shop;

public class Product implements Priced {
    private final String name;
    private final double price;

    public Product(String name, double price) {
        this.name = name;
        this.price = price;
    }

    public String name() {
        return name;
    }

    @Override
    public double price() {
        return price;
    }
}
